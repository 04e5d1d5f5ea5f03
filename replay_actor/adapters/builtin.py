"""The built-in adapters: one for each vendor shape of ``vendors.REGISTRY``, made from it.

Runs in: the caller (a live or record provider's calls).

A built-in adapter is a vendor shape's live side over HTTP: the shape's ``to_body`` and
``from_response`` (the mapping both ways, in ``vendors/``) and its ``live`` endpoint
(``vendors/_endpoint.py``: the default base URL, the path, the header the key goes in,
keys of its own), on ``_http.HTTPAdapter``'s timeouts, retries and error hygiene. A
vendor shape added to the registry is therefore a live and record adapter too, under the
same name, with nothing to write here::

    vendors.REGISTRY["gemini"] --builtin_adapter("gemini")--> GeminiAdapter(config)
      POST {base_url}/{api_version}/models/{model}:generateContent, x-goog-api-key

The classes are made on first use and kept, so a name always gives the same class. Each
is also an attribute of this module under its endpoint's ``adapter`` name
(``OpenAIAdapter``, ``AnthropicAdapter``, ...): what the package's entry points name.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any, ClassVar, Final, cast

from .._errors import ManifestError, RequestError
from ..vendors import EndpointOption, LiveEndpoint, Vendor, make_vendor, vendor_names
from ._config import COMMON_KEYS, HTTPConfig, string_field
from ._http import HTTPAdapter

__all__ = ["VendorAdapter", "builtin_adapter"]


class VendorAdapter(HTTPAdapter):
    """A vendor shape's live adapter (sync and async); each shape has its subclass
    (:func:`builtin_adapter`).

    Built from the manifest's adapter table: the keys every HTTP adapter takes
    (``model``, ``base_url``, ``api_key_env``, ``timeout``, ``connect_timeout``,
    ``max_retries``, ``retry_backoff``, ``retry_max_wait``, ``headers``,
    ``max_response_bytes``) plus the endpoint's own (see docs/manifest.md).
    """

    #: The vendor shape whose ``to_body`` and ``from_response`` it calls (stateless both).
    vendor: ClassVar[Vendor]
    endpoint: ClassVar[LiveEndpoint]

    def __init__(self, config: Mapping[str, Any]) -> None:
        endpoint = self.endpoint
        # The path's own keys are checked first: the URL is made from them.
        path = _path(endpoint, config)
        self._path_values = _path_values(endpoint, config)
        cfg = HTTPConfig(
            config,
            name=self.name,
            default_base_url=endpoint.base_url,
            path=path,
            allowed=COMMON_KEYS | {option.key for option in endpoint.options},
        )
        headers = dict(cfg.headers)
        for option in endpoint.options:
            if option.header is not None:
                headers[option.header] = _option(config, option)
        if cfg.api_key is not None:
            headers[endpoint.key_header] = endpoint.key_prefix + cfg.api_key
        super().__init__(cfg, headers)
        self._base_url = cfg.url[: len(cfg.url) - len(path)]

    @property
    def keeps_logprobs(self) -> bool:
        """True if the vendor shape's answers say token log probabilities."""
        return getattr(self.vendor, "keeps_logprobs", False) is True

    def _shape_of(self, request: dict[str, Any]) -> Vendor:
        """The shape that asks ``request`` live: this adapter's own for chat, the one its
        endpoint names for another kind; ``RequestError`` for a kind it cannot ask."""
        kind = request.get("kind")
        if kind is None:
            return self.vendor
        name = dict(self.endpoint.kinds).get(kind)
        if name is None:
            raise RequestError(f"the {self.name} adapter cannot ask {kind!r} requests live")
        return _kind_vendor(name)

    def body(self, request: dict[str, Any]) -> dict[str, Any]:
        shape = self._shape_of(request)
        return shape.to_body(request, self.model)

    def url_for(self, request: dict[str, Any]) -> str:
        shape = self._shape_of(request)
        if shape is self.vendor:
            return self._config.url
        # An embedding names its own model (it is hashed); other kinds use the table's.
        model = request.get("model") if request.get("kind") == "embedding" else self.model
        name = urllib.parse.quote(str(model or "").removeprefix("models/"), safe="")
        return self._base_url + shape.live.path.format(model=name, **self._path_values)

    def parse(self, data: Any) -> dict[str, Any]:
        return self.vendor.from_response(data)

    def parse_for(self, request: dict[str, Any], data: Any) -> dict[str, Any]:
        return self._shape_of(request).from_response(data)


_KIND_VENDORS: dict[str, Vendor] = {}


def _kind_vendor(name: str) -> Vendor:
    """The (stateless) shape registered as ``name``, made once."""
    made = _KIND_VENDORS.get(name)
    if made is None:
        made = _KIND_VENDORS[name] = make_vendor(name)
    return made


def _option(config: Mapping[str, Any], option: EndpointOption) -> str:
    """The table's value of ``option``, checked (``ManifestError`` naming its key)."""
    value = string_field(config, option.key, option.default)
    if option.pattern is None:
        return value or option.default
    if value is None or re.match(option.pattern, value) is None:
        raise ManifestError(option.problem, key=option.key)
    return value


def _path_values(endpoint: LiveEndpoint, config: Mapping[str, Any]) -> dict[str, str]:
    """The values of the path options (``api_version``), for the other kinds' paths."""
    readable = isinstance(config, Mapping)
    return {
        option.key: _option(config, option) if readable else option.default
        for option in endpoint.options
        if option.header is None
    }


def _path(endpoint: LiveEndpoint, config: Mapping[str, Any]) -> str:
    """The endpoint's path with the model and the path options filled in."""
    if "{" not in endpoint.path:
        return endpoint.path
    # A table that is no table is refused by HTTPConfig, with its own message.
    readable = isinstance(config, Mapping)
    model = (string_field(config, "model", None) if readable else None) or ""
    values = {
        option.key: _option(config, option) if readable else option.default
        for option in endpoint.options
        if option.header is None
    }
    name = urllib.parse.quote(model.removeprefix("models/"), safe="")
    return endpoint.path.format(model=name, **values)


#: The classes made so far, by name: one class per name, however many threads ask.
_MADE: dict[str, type[VendorAdapter]] = {}
_MAKING: Final = threading.Lock()


def builtin_adapter(name: str) -> type[VendorAdapter]:
    """The built-in adapter class of the registered vendor shape ``name`` (always the same
    class for a name); ``ValueError`` naming the registered ones for another name."""
    with _MAKING:
        made = _MADE.get(name)
        if made is None:
            made = _MADE[name] = _make(name)
    return made


def _make(name: str) -> type[VendorAdapter]:
    vendor = make_vendor(name)
    endpoint = vendor.live
    namespace = {
        "__module__": __name__,
        "__qualname__": endpoint.adapter,
        "__doc__": f"The built-in ``{name}`` adapter: {endpoint.shape} from "
        f"``{endpoint.base_url}{endpoint.path}`` (see :class:`VendorAdapter`).",
        "name": name,
        "_shape": endpoint.shape,
        "vendor": vendor,
        "endpoint": endpoint,
    }
    return cast("type[VendorAdapter]", type(endpoint.adapter, (VendorAdapter,), namespace))


def __getattr__(attribute: str) -> type[VendorAdapter]:
    # OpenAIAdapter, AnthropicAdapter, ...: the classes the entry points name.
    if attribute.endswith("Adapter"):
        for name in vendor_names():
            made = builtin_adapter(name)
            if made.__name__ == attribute:
                return made
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
