"""Versioned prompt files: `prompts/system.md` (front matter `version`) and `prompts/styles.yaml`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from mentor.errors import NotReady


@dataclass(frozen=True, slots=True)
class Prompt:
    """The system prompt template and the per-style instructions, with the version logged on every answer."""

    version: str
    template: str
    styles: dict[str, str]

    def system(self, *, module_id: str, module_title: str, style: str) -> str:
        """The system message for one question."""
        return self.template.format(
            module_id=module_id, module_title=module_title, style_instructions=self.styles[style]
        )


def load_prompt(prompts_dir: Path) -> Prompt:
    """Read and check the prompt files once, at start."""
    path = prompts_dir / "system.md"
    try:
        raw = path.read_text(encoding="utf-8")
        _, front, template = raw.split("---", 2)
        meta = yaml.safe_load(front) or {}
        styles = yaml.safe_load((prompts_dir / "styles.yaml").read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise NotReady(f"{path}: prompt files cannot be read ({exc})") from exc
    if not isinstance(meta.get("version"), str) or not isinstance(styles, dict):
        raise NotReady(f"{path}: needs front matter with a `version` string, and styles.yaml a mapping")
    missing = {"explain", "hint", "brief"} - set(styles)
    if missing:
        raise NotReady(f"{prompts_dir / 'styles.yaml'}: missing styles {sorted(missing)}")
    return Prompt(meta["version"], template.strip(), {k: str(v) for k, v in styles.items()})
