"""Storage options as pylance takes them, turned into keyword arguments of an fsspec filesystem.

pylance (Rust ``object_store``) and s3fs name the same settings differently. So that one dict
serves both libraries, ``s3://`` (and ``s3a://``) accept pylance's keys as they are, with
``object_store``'s environment variables as fallbacks for settings the dict leaves out:

=============================================  =======================  ==========================
pylance key (aliases)                          environment fallback     s3fs argument
=============================================  =======================  ==========================
``aws_endpoint`` (``endpoint``,                ``AWS_ENDPOINT``,        ``endpoint_url``
``aws_endpoint_url``)                          ``AWS_ENDPOINT_URL``
``allow_http`` (``aws_allow_http``)            ``AWS_ALLOW_HTTP``,      (checked: an ``http://``
                                               ``ALLOW_HTTP``           endpoint needs it true)
``aws_access_key_id`` (``access_key_id``)      ``AWS_ACCESS_KEY_ID``    ``key``
``aws_secret_access_key``                      ``AWS_SECRET_ACCESS_KEY`` ``secret``
(``secret_access_key``)
``aws_session_token`` (``session_token``,      ``AWS_SESSION_TOKEN``    ``token``
``aws_token``)
``aws_region`` (``region``)                    ``AWS_REGION``,          ``client_kwargs.region_name``
                                               ``AWS_DEFAULT_REGION``
``aws_virtual_hosted_style_request``           --                       ``config_kwargs`` addressing
(``virtual_hosted_style_request``)                                      style (virtual / path)
``aws_skip_signature`` (``skip_signature``)    --                       ``anon``
=============================================  =======================  ==========================

The filesystem's own keyword arguments (``key``, ``client_kwargs``, ``anon``, ...) are accepted
too, and ``dynamodb_endpoint`` (read by the ``s3+ddb://`` manifest store, ignored here); a key that
is none of these raises :class:`~lance_ops.errors.StorageOptionError` naming it (never
its value: values may be secrets). Directory listings are never cached (``use_listings_cache`` is
off): another process may commit a new version at any time, and a cached listing of ``_versions/``
would hide it. Other URL schemes get their options unchanged.

Retries: lance_ops' own policy (:mod:`lance_ops.io.retry`, bounded exponential backoff) owns the
retry budget of ``s3://``. Left to their defaults, botocore (5 attempts, its own backoff) and s3fs
(``retries``: 5 attempts of its ``_error_wrapper``, for SlowDown and cut bodies) would each retry
beneath it, and the three budgets multiply: a persistently failing endpoint took up to a minute to
fail. So unless the options say otherwise, botocore makes one attempt
(``config_kwargs={"retries": {"total_max_attempts": 1, "mode": "standard"}}``) and s3fs one
(``retries=1``: s3fs reads it as an attribute, not a constructor argument, so the returned
``retries`` is for :class:`~lance_ops.io.fsspec_store.FsspecStore` to set on the filesystem it
builds, never to pass to the constructor). A ``retries`` key or a ``config_kwargs["retries"]``
given in the options wins over these defaults. Likewise botocore keeps up to
:data:`DEFAULT_S3_CONNECTIONS` connections open (``config_kwargs["max_pool_connections"]``; its
own default of 10 would queue the requests a scan keeps in flight).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from lance_ops.errors import StorageOptionError

__all__ = [
    "DEFAULT_BOTOCORE_RETRIES",
    "DEFAULT_S3_CONNECTIONS",
    "DEFAULT_S3FS_RETRIES",
    "S3FS_RETRIES_OPTION",
    "S3_PROTOCOLS",
    "fsspec_options",
]

S3_PROTOCOLS = frozenset({"s3", "s3a"})

# pylance key -> the setting it names.
_S3_KEYS = {
    "aws_endpoint": "endpoint",
    "aws_endpoint_url": "endpoint",
    "endpoint": "endpoint",
    "allow_http": "allow_http",
    "aws_allow_http": "allow_http",
    "aws_access_key_id": "key",
    "access_key_id": "key",
    "aws_secret_access_key": "secret",
    "secret_access_key": "secret",
    "aws_session_token": "token",
    "session_token": "token",
    "aws_token": "token",
    "aws_region": "region",
    "region": "region",
    "aws_virtual_hosted_style_request": "virtual_hosted",
    "virtual_hosted_style_request": "virtual_hosted",
    "aws_skip_signature": "anon",
    "skip_signature": "anon",
}

# Environment variables read (in order) for a setting the options leave out, as object_store does.
_S3_ENV = {
    "endpoint": ("AWS_ENDPOINT", "AWS_ENDPOINT_URL"),
    "allow_http": ("AWS_ALLOW_HTTP", "ALLOW_HTTP"),
    "key": ("AWS_ACCESS_KEY_ID",),
    "secret": ("AWS_SECRET_ACCESS_KEY",),
    "token": ("AWS_SESSION_TOKEN",),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
}

# pylance keys for other services of the same URI (s3+ddb://), accepted and left to them.
_OTHER_SERVICE_KEYS = frozenset({"dynamodb_endpoint"})

# Keyword arguments every fsspec filesystem takes (instance and listings caches).
_FSSPEC_KEYS = frozenset({"use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache"})

# s3fs's own retry count (a class attribute of S3FileSystem, set on the instance by FsspecStore) and
# botocore's retry configuration, as lance_ops sets them when the options leave them out (module
# docstring): one attempt each, lance_ops' RetryPolicy retries.
S3FS_RETRIES_OPTION = "retries"
DEFAULT_S3FS_RETRIES = 1
DEFAULT_BOTOCORE_RETRIES: Mapping[str, Any] = {"total_max_attempts": 1, "mode": "standard"}
# Connections botocore keeps open per client when the options leave ``config_kwargs
# ["max_pool_connections"]`` out (botocore's own default is 10): scans keep the requests of the
# files ahead in flight together (16 fragments' files, manifests 16 ahead, concurrent range reads).
DEFAULT_S3_CONNECTIONS = 64

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


def fsspec_options(protocol: str, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for the fsspec filesystem of ``protocol`` built from ``storage_options``."""
    options = dict(storage_options or {})
    if protocol.lower() not in S3_PROTOCOLS:
        return options
    return _s3_options(protocol, options)


@functools.cache
def _native_keys(protocol: str) -> frozenset[str]:
    """The keyword arguments the filesystem class of ``protocol`` declares (imports its driver)."""
    import fsspec  # noqa: PLC0415 - remote stores only

    params = inspect.signature(fsspec.get_filesystem_class(protocol).__init__).parameters
    named = {name for name, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return frozenset(named - {"self"}) | _FSSPEC_KEYS


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise StorageOptionError(f"storage option {key!r} must be true or false")


def _s3_options(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    native = _native_keys(protocol)
    settings: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key in _OTHER_SERVICE_KEYS:
            continue
        setting = _S3_KEYS.get(key.lower())
        if setting is None:
            if key not in native and key != S3FS_RETRIES_OPTION:
                raise StorageOptionError(
                    f"unknown storage option {key!r} for {protocol}:// (pylance's keys such as "
                    f"'aws_endpoint', 'aws_access_key_id', 'aws_region' or {protocol}fs arguments)"
                )
            kwargs[key] = value
            continue
        if setting in settings and settings[setting] != value:
            raise StorageOptionError(
                f"storage options {given_as[setting]!r} and {key!r} give one setting two values"
            )
        settings[setting] = value
        given_as[setting] = key
    for setting, names in _S3_ENV.items():
        if setting not in settings:
            name = next((name for name in names if os.environ.get(name)), None)
            if name is not None:
                settings[setting] = os.environ[name]
                given_as[setting] = name
    return _apply(settings, given_as, kwargs)


def _apply(settings: dict[str, Any], given_as: dict[str, str], kwargs: dict[str, Any]) -> dict[str, Any]:
    """s3fs arguments: ``kwargs`` (the filesystem's own) merged with the pylance ``settings``."""
    for setting, argument in (("key", "key"), ("secret", "secret"), ("token", "token")):
        if setting in settings:
            kwargs.setdefault(argument, settings[setting])
    client_kwargs = dict(kwargs.get("client_kwargs") or {})
    endpoint = settings.get("endpoint")
    if endpoint is not None:
        if urlsplit(str(endpoint)).scheme.lower() == "http" and not _flag(
            given_as.get("allow_http", "allow_http"), settings.get("allow_http", False)
        ):
            raise StorageOptionError(
                f"storage option {given_as['endpoint']!r} is a plain-HTTP endpoint; "
                f"set 'allow_http' to 'true' to use it (as pylance requires)"
            )
        kwargs.setdefault("endpoint_url", str(endpoint))
    elif "allow_http" in settings:
        _flag(given_as["allow_http"], settings["allow_http"])
    if "region" in settings:
        client_kwargs.setdefault("region_name", str(settings["region"]))
    if client_kwargs:
        kwargs["client_kwargs"] = client_kwargs
    config = dict(kwargs.get("config_kwargs") or {})
    if "virtual_hosted" in settings:
        style = "virtual" if _flag(given_as["virtual_hosted"], settings["virtual_hosted"]) else "path"
        config["s3"] = {**config.get("s3", {}), "addressing_style": style}
    config.setdefault("retries", dict(DEFAULT_BOTOCORE_RETRIES))
    config.setdefault("max_pool_connections", DEFAULT_S3_CONNECTIONS)
    kwargs["config_kwargs"] = config
    # Checked here; FsspecStore pops it before building the filesystem (s3fs hands unknown
    # arguments on to its botocore session, which rejects them).
    kwargs[S3FS_RETRIES_OPTION] = _retries(kwargs.get(S3FS_RETRIES_OPTION, DEFAULT_S3FS_RETRIES))
    if "anon" in settings:
        kwargs.setdefault("anon", _flag(given_as["anon"], settings["anon"]))
    kwargs["use_listings_cache"] = False
    return kwargs


def _retries(value: Any) -> int:
    """s3fs's ``retries`` (its attempts per request, at least one) from an option's value."""
    try:
        count = int(str(value).strip()) if not isinstance(value, bool) else -1
    except ValueError:
        count = -1
    if count < 1:
        raise StorageOptionError(f"storage option {S3FS_RETRIES_OPTION!r} must be a whole number >= 1")
    return count
