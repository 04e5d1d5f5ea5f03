"""The core layer: the request and its hash (_request, _canonical, _kinds, _memo),
strict JSON text (_strict_json) and the neutral response (_response)."""
