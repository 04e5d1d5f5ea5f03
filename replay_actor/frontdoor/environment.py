"""The environment ``replay-actor run`` gives COMMAND (docs/front-door.md, "Clients").

Runs in: the ``run`` process, before the child is spawned. This module owns

- which variables point each vendor's client at the front door, and what each is set
  to (each client's own path under its base URL, read from its source, decides the
  suffix), which key variables get the run's token, and which credentials and switches
  are removed (a switch such as ``GOOGLE_GENAI_USE_VERTEXAI`` sends a client elsewhere):
  a family's are read from its record (``vendors.FAMILIES``); the others, of clients
  that belong to no family of ours (groq, together, Mistral), are listed here;
- that no real key reaches the child in any form: the manifest's ``api_key_env``
  variables and every key or credential variable above are secrets, and any other
  variable whose value is one of them, or holds a long piece of one (a header line,
  the key plus a newline), is left out;
- the proxy variables of a sealed run (:mod:`.proxy`);
- the warning that names (never shows) a foreign vendor's key no variable redirects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from ..adapters._secrets import holds_key_piece
from ..vendors import FAMILIES
from .proxy import proxy_variables

__all__ = [
    "BASE_URL_VARIABLES",
    "KEY_VARIABLES",
    "REMOVED_VARIABLES",
    "child_environment",
    "foreign_key_warning",
]

#: Variables of clients that speak a family's API but belong to no family of ours, and
#: the front door's own URL: variable -> the path below the front door's URL.
_OTHER_BASE_URLS: Final = (
    # groq posts {base}/openai/v1/chat/completions.
    ("GROQ_BASE_URL", ""),
    # together (2.x, 3.x) posts {base}/v1/chat/completions once the base is overridden.
    ("TOGETHER_BASE_URL", ""),
    # The front door itself, for a client whose base URL only the application can pass
    # (Mistral's server_url, @ai-sdk/google's baseURL).
    ("REPLAY_ACTOR_URL", ""),
)
#: Variable -> the path below the front door's URL it is set to: every family's
#: (``vendors.FAMILIES``, each client's own path under its base URL, read from its
#: source, decides the path), then the others.
BASE_URL_VARIABLES: Final[dict[str, str]] = {
    variable: below for family in FAMILIES for variable, below in family.variables.base_urls
} | dict(_OTHER_BASE_URLS)
#: Key variables of vendors with no family of ours whose clients the variables above
#: redirect (groq, together), or whose base URL is an option of the application's own
#: (Mistral's ``server_url``), which then send the token too.
_OTHER_KEYS: Final = ("GROQ_API_KEY", "TOGETHER_API_KEY", "MISTRAL_API_KEY")
#: Always set to the run's token: every family's key variables, then the others.
#: ANTHROPIC_AUTH_TOKEN is not set: the Anthropic SDKs would send the token twice; an
#: inherited one is removed instead (a credential of the anthropic family).
KEY_VARIABLES: Final = (
    *(key for family in FAMILIES for key in family.variables.keys),
    *(key for family in FAMILIES for key in family.variables.unredirected),
    *_OTHER_KEYS,
)
#: Keys of vendors whose clients no variable redirects, as found in the wild: named in a
#: warning when inherited, and set to the token (only when inherited: some tools choose a
#: vendor by which key is present). A key a family declares is not among them: its
#: family's variables redirect its clients.
_FOREIGN_KEYS: Final = tuple(
    key
    for key in (
        "AI21_API_KEY",
        "CEREBRAS_API_KEY",
        "CO_API_KEY",
        "COHERE_API_KEY",
        "DASHSCOPE_API_KEY",
        "DEEPSEEK_API_KEY",
        "FIREWORKS_API_KEY",
        "MOONSHOT_API_KEY",
        "NVIDIA_API_KEY",
        "OPENROUTER_API_KEY",
        "PERPLEXITYAI_API_KEY",
        "PERPLEXITY_API_KEY",
        "REPLICATE_API_TOKEN",
        "SAMBANOVA_API_KEY",
        "XAI_API_KEY",
    )
    if key not in KEY_VARIABLES
)
#: Of the variables set to the token, those whose vendor's client reads no base URL from
#: the environment: an inherited one is named in the warning too.
_NO_BASE_URL: Final = (
    "MISTRAL_API_KEY",
    *(key for family in FAMILIES for key in family.variables.unredirected),
)
#: Credentials an SDK would prefer to, or add beside, the token.
_CREDENTIALS: Final = tuple(c for family in FAMILIES for c in family.variables.credentials)
#: Switches that send a client somewhere the base URLs above do not cover.
_SWITCHES: Final = tuple(s for family in FAMILIES for s in family.variables.switches)
#: Removed from the child's environment whatever their value.
REMOVED_VARIABLES: Final = _CREDENTIALS + _SWITCHES
#: Set when the environment has none (``openai.AzureOpenAI`` needs an API version; an
#: inherited one is kept).
_DEFAULTS: Final = tuple(d for family in FAMILIES for d in family.variables.defaults)
#: A secret shorter than this is matched only as a whole value: a short piece of a short
#: value ("dummy") would match ordinary text.
_PIECES_FROM: Final = 16


def _holds(value: str, secrets: Iterable[str]) -> bool:
    stripped = value.strip()
    for secret in secrets:
        if stripped == secret:
            return True
        if len(secret) >= _PIECES_FROM and holds_key_piece(value, secret):
            return True
    return False


def child_environment(
    environ: Mapping[str, str],
    info: Mapping[str, str],
    secret_names: Iterable[str],
    *,
    no_proxy: str | None = None,
) -> dict[str, str]:
    """The child's environment: ``environ`` without any secret (``secret_names``, every
    key variable and credential) or any variable holding one, without the switches,
    with every client's variable pointed at the front door and every key variable set to
    the token. ``no_proxy``: set the proxy variables too (a sealed run), with this
    ``NO_PROXY``."""
    token = info["token"]
    secret_vars = {*secret_names, *KEY_VARIABLES, *_FOREIGN_KEYS, *_CREDENTIALS}
    secrets = {environ[n].strip() for n in secret_vars if environ.get(n, "").strip()}
    removed = {*secret_names, *REMOVED_VARIABLES}
    env = {
        name: value
        for name, value in environ.items()
        if name not in removed and not _holds(value, secrets)
    }
    for name in _FOREIGN_KEYS:
        if name in environ:
            env[name] = token
    for variable, below in BASE_URL_VARIABLES.items():
        env[variable] = info["url"] + below
    for variable in KEY_VARIABLES:
        env[variable] = token
    for variable, value in _DEFAULTS:
        env[variable] = environ.get(variable) or value
    if no_proxy is not None:
        env.update(proxy_variables(info["url"], no_proxy))
    return env


def foreign_key_warning(environ: Mapping[str, str]) -> str | None:
    """The warning naming the inherited keys of vendors no variable redirects, or None."""
    names = sorted(n for n in (*_FOREIGN_KEYS, *_NO_BASE_URL) if environ.get(n))
    if not names:
        return None
    return (
        f"replay-actor run: warning: {', '.join(names)} "
        f"{'is' if len(names) == 1 else 'are'} set, but no variable sends "
        f"{'that vendor' if len(names) == 1 else 'those vendors'}' clients to the front door; "
        "the child gets the run's token in place of the key (docs/front-door.md, 'Clients')"
    )
