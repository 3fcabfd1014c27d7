"""Settings: a TOML file, overridden by environment variables (RECALL_*).

The file is `$XDG_CONFIG_HOME/session-recall/config.toml` (`~/.config/...`) or
the one named by `--config` / `RECALL_CONFIG`. Every key is optional; a wrong
key or value stops with a message that names the key and what it allows.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from .paths import PathRules


def data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "session-recall"


def config_path() -> Path:
    env = os.environ.get("RECALL_CONFIG")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "session-recall" / "config.toml"


def default_db() -> Path:
    """`RECALL_DB`, else recall.db under the user's XDG data directory."""
    env = os.environ.get("RECALL_DB")
    return Path(env).expanduser() if env else data_dir() / "recall.db"


class SourceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    kind: str = "auto"

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        from .indexer.sources import kind_names  # (the registry of source kinds)

        names = kind_names()
        if kind not in names:
            raise ValueError("must be " + ", ".join(map(repr, names[:-1])) + f" or {names[-1]!r}")
        return kind


class Settings(BaseSettings):
    """Policies and budgets. Defaults are what a careful user would pick."""

    model_config = SettingsConfigDict(env_prefix="RECALL_", extra="forbid", env_nested_delimiter="__")

    sources: list[SourceConfig] = Field(default_factory=list)
    # all_projects: allow (default), deny, or confirm (ask the user; no answer means no).
    all_projects: Literal["allow", "deny", "confirm"] = "allow"
    allow_cwds: list[str] = Field(default_factory=list, description="if set, only sessions under these cwds")
    deny_cwds: list[str] = Field(default_factory=list, description="never sessions under these; wins over allow")
    pinned_cwds: list[str] = Field(default_factory=list, description="sessions under these rank first")
    recency_half_life_days: float | None = Field(default=None, gt=0)
    redaction: Literal["mask", "hash"] = "mask"
    default_limit: int = Field(default=5, ge=1, le=100)
    max_limit: int = Field(default=50, ge=1, le=500)
    # The exact scan that answers where the index cannot vouch visits at most
    # this many sessions, most recent first (docs/recall.md).
    scan_budget_sessions: int = Field(default=200, ge=1)
    # First use: an empty index with known sources is built before answering,
    # for at most this long (an agent's tool call times out after seconds).
    first_use_budget_s: float = Field(default=8.0, ge=0)
    # Bounds on what one log may cost to read (docs/indexing.md, "Bounds"):
    # a longer line is counted as too_large; a .zst stops being
    # decompressed, counted as zst_limit, past zst_max_bytes of output, or
    # past zst_ratio_after bytes and zst_max_ratio times its compressed size,
    max_line_bytes: int = Field(default=64 << 20, ge=1 << 10)
    zst_max_bytes: int = Field(default=4 << 30, ge=1 << 20)
    zst_max_ratio: int = Field(default=100, ge=1)
    zst_ratio_after: int = Field(default=64 << 20, ge=0)
    # ... or past zst_lines_after lines and zst_max_line_ratio lines per
    # compressed byte (a bomb of short lines).
    zst_max_line_ratio: int = Field(default=8, ge=1)
    zst_lines_after: int = Field(default=1 << 20, ge=0)

    _rules: tuple | None = PrivateAttr(default=None)

    def model_post_init(self, context) -> None:
        self.path_rules()  # the lists are resolved when the configuration is read

    def confines(self) -> bool:
        """Whether some caller may be kept from some project: a list, or an
        all_projects policy other than allow (docs/recall.md, "What a
        confined caller can learn")."""
        return bool(self.allow_cwds or self.deny_cwds) or self.all_projects != "allow"

    def path_rules(self) -> PathRules:
        """allow_cwds, deny_cwds and pinned_cwds in both spellings (as written
        and resolved), worked out once: a symlink re-pointed later does not
        change what a reader that has them lets through (docs/recall.md).
        Worked out again only if the lists themselves are replaced."""
        lists = (tuple(self.allow_cwds), tuple(self.deny_cwds), tuple(self.pinned_cwds))
        if self._rules is None or self._rules[0] != lists:
            self._rules = (lists, PathRules.read(self.allow_cwds, self.deny_cwds, self.pinned_cwds))
        return self._rules[1]

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings) -> tuple[PydanticBaseSettingsSource, ...]:
        path = settings_cls.model_config.get("toml_file") or config_path()
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=path))


class ConfigError(ValueError):
    """Bad configuration: the message names the key and the allowed values."""


def load_settings(path: str | os.PathLike[str] | None = None, **overrides) -> Settings:
    if path and not Path(path).expanduser().exists():
        raise ConfigError(f"config file {path} does not exist")
    cls = Settings
    if path:
        cfg = SettingsConfigDict(**{**Settings.model_config, "toml_file": Path(path).expanduser()})
        # type() is typed as returning a bare `type`; this one subclasses Settings
        cls = cast("type[Settings]", type("FileSettings", (Settings,), {"model_config": cfg}))
    try:
        return cls(**overrides)
    except SettingsError as e:  # a RECALL_* value the settings could not even parse (not JSON for a list)
        field = str(e).split('"')[1] if str(e).count('"') >= 2 else ""
        where = _env_name(field) if field else None
        raise ConfigError(f"bad configuration: {where or 'a RECALL_* environment variable'}: its value could "
                          f"not be read ({e.__cause__ or e}); a list is written as JSON, e.g. '[\"~/code\"]'") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path or config_path()} is not valid TOML: {e}") from None
    except ValidationError as e:
        file = str(path or config_path())
        lines = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"])
            # Unknown RECALL_* variables are not read, so an unknown key is the file's.
            extra = err["type"] == "extra_forbidden"
            where = _env_name(str(err["loc"][0])) if err["loc"] and not extra else None
            origin = f"{key} (from the environment variable {where})" if where else f"{key} (in {file})"
            if extra:
                lines.append(f"{origin}: unknown key; the keys are {', '.join(Settings.model_fields)}")
            else:
                lines.append(f"{origin}: {err['msg']}; got {err.get('input')!r}")
        raise ConfigError("bad configuration:\n  " + "\n  ".join(lines)) from None


def _env_name(field: str) -> str | None:
    """The RECALL_* variable that set `field`, if one did: the environment
    wins over the file, so a bad value under that key came from it. Names
    are matched without case, as the settings read them."""
    name = "RECALL_" + field.upper()
    for var in os.environ:
        if var.upper() == name or var.upper().startswith(name + "__"):
            return var
    return None


def configured_sources(settings: Settings) -> list[tuple[str, str]]:
    """Sources from the settings, as (path, kind)."""
    return [(os.path.expanduser(s.path), s.kind) for s in settings.sources]


def default_sources(settings: Settings) -> tuple[str, list[tuple[str, str]]]:
    """What `index` and `watch` read when given no path: the configured
    sources, else the harnesses' own folders that exist on this machine.
    Returns where they came from ("config", "defaults") and (path, kind)."""
    if settings.sources:
        return "config", configured_sources(settings)
    from .indexer.sources import default_folders  # (the registry of source kinds)

    return "defaults", [(path, kind) for path, kind in default_folders() if os.path.exists(path)]
