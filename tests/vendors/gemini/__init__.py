"""vendors/gemini/: Google Gemini's shapes (generateContent, embed, countTokens)."""
