"""``LanceHook``: where a Lance dataset lives, from an Airflow connection of type ``lance``.

A connection names the dataset and how to reach it:

* the dataset URI: the extra's ``uri``, else the connection's host (``s3://bucket/ds.lance``,
  ``s3+ddb://...``, ``gs://...``, a local directory);
* ``storage_options`` in the extra (pylance's keys, e.g. ``aws_endpoint``, ``region``);
* the connection's login and password, if set, become two more storage options -- by default
  ``aws_access_key_id`` and ``aws_secret_access_key``; the extra's ``login_option`` and
  ``password_option`` name others (``azure_storage_account_name`` / ``azure_storage_account_key``);
* ``manifest_store`` in the extra: the path of a SQLite external manifest store
  (:class:`lance_ops.SqliteManifestStore`) to commit through.

Secrets stay secrets: the password and every storage option whose name says it is secret are
registered with Airflow's secrets masker before anything is logged, and nothing here logs or
formats an option's value (:class:`LanceTarget`'s repr shows the URI and the option names only).
A value written ``${NAME}`` refers to the environment variable ``NAME`` (as in the datasets file)
and is resolved when the target is built, in the task's process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

import lance_ops
from lance_ops.dataset import LanceDataset
from lance_ops.datasets_config import resolve_storage_options
from lance_ops.errors import DatasetNotFoundError, InvalidArgumentError
from lance_ops.ops.engine import ExternalManifestStore, SqliteManifestStore

# Words in an option's name that mark its value as a secret (masked in Airflow's logs).
SECRET_WORDS = ("secret", "password", "token", "credential", "session", "private", "sas", "account_key")
LOGIN_OPTION = "aws_access_key_id"
PASSWORD_OPTION = "aws_secret_access_key"


def is_secret_option(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def mask_options(options: Mapping[str, str]) -> None:
    """Register the secret values of ``options`` with Airflow's secrets masker."""
    for name, value in options.items():
        if value and is_secret_option(name):
            mask_secret(value, name)


@dataclass(frozen=True)
class LanceTarget:
    """A dataset location: URI, resolved storage options and (optionally) an external manifest store."""

    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    manifest_store: ExternalManifestStore | None = None

    def __repr__(self) -> str:
        return f"LanceTarget(uri={self.uri!r}, storage_options=<{', '.join(sorted(self.storage_options))}>)"

    def open(self, version: int | str | None = None) -> LanceDataset:
        """The dataset (latest version unless ``version``); ``DatasetNotFoundError`` when absent."""
        return lance_ops.dataset(self.uri, version, dict(self.storage_options), self.manifest_store)

    def open_or_none(self) -> LanceDataset | None:
        try:
            return self.open()
        except DatasetNotFoundError:
            return None


class LanceHook(BaseHook):
    """A Lance dataset reached through the ``lance`` connection ``lance_conn_id`` and/or a ``uri``.

    Explicit arguments win over the connection: ``uri`` replaces its URI and ``storage_options``
    are laid over its options. Without a connection id, ``uri`` (and ``storage_options``) alone
    name the dataset."""

    conn_name_attr = "lance_conn_id"
    default_conn_name = "lance_default"
    conn_type = "lance"
    hook_name = "Lance"

    def __init__(
        self,
        lance_conn_id: str | None = default_conn_name,
        *,
        uri: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        manifest_store: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lance_conn_id = lance_conn_id
        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.manifest_store = manifest_store

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "port"],
            "relabeling": {
                "host": "Dataset URI",
                "login": "Access key id (storage option, optional)",
                "password": "Secret access key (storage option, optional)",
            },
            "placeholders": {
                "host": "s3://bucket/path/table.lance",
                "extra": '{"storage_options": {"region": "eu-west-1"}, "manifest_store": null}',
            },
        }

    def target(self) -> LanceTarget:
        """The dataset's location with every secret resolved (and masked)."""
        options: dict[str, str] = {}
        uri = self.uri
        store_path = self.manifest_store
        if self.lance_conn_id:
            conn = self.get_connection(self.lance_conn_id)
            extra = conn.extra_dejson
            uri = uri or extra.get("uri") or conn.host
            configured = extra.get("storage_options") or {}
            if not isinstance(configured, Mapping):
                raise InvalidArgumentError(
                    f"connection {self.lance_conn_id!r}: extra 'storage_options' must be a mapping"
                )
            options.update({str(k): str(v) for k, v in configured.items()})
            if conn.login:
                options[extra.get("login_option", LOGIN_OPTION)] = conn.login
            if conn.password:
                mask_secret(conn.password)
                options[extra.get("password_option", PASSWORD_OPTION)] = conn.password
            store_path = store_path or extra.get("manifest_store")
        if not uri:
            raise InvalidArgumentError(
                "no dataset URI: pass uri= or a lance connection with a host or an extra 'uri'"
            )
        options.update(self.storage_options)
        resolved = resolve_storage_options(options)
        mask_options(resolved)
        store = SqliteManifestStore(store_path) if store_path else None
        return LanceTarget(uri, resolved, store)

    def get_conn(self) -> LanceDataset:
        """The dataset's latest version."""
        return self.target().open()

    def test_connection(self) -> tuple[bool, str]:
        try:
            ds = self.get_conn()
        except Exception as exc:  # the UI shows the reason
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"version {ds.version} of {ds.uri}"


class LanceLocation:
    """The dataset arguments every Lance operator, sensor and trigger takes: ``uri`` and/or
    ``lance_conn_id`` and ``storage_options``, kept as written (``${NAME}`` unresolved) until
    :meth:`lance_target` resolves them where the dataset is opened."""

    uri: str | None
    lance_conn_id: str | None
    storage_options: dict[str, str]

    def set_location(
        self,
        owner: str,
        uri: str | None,
        lance_conn_id: str | None,
        storage_options: Mapping[str, str] | None,
    ) -> None:
        if uri is None and lance_conn_id is None:
            raise InvalidArgumentError(f"{owner}: pass uri or lance_conn_id")
        self.uri = uri
        self.lance_conn_id = lance_conn_id
        self.storage_options = dict(storage_options or {})

    def lance_location(self) -> dict[str, Any]:
        return {"uri": self.uri, "lance_conn_id": self.lance_conn_id, "storage_options": self.storage_options}

    def lance_target(self) -> LanceTarget:
        return LanceHook(self.lance_conn_id, uri=self.uri, storage_options=self.storage_options).target()
