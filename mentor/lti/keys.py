"""The tool's RSA key: it signs deep-linking responses (RS256), and its public half is served as a JWKS.

Where it comes from: MENTOR_LTI_PRIVATE_KEY_FILE, or data_dir/lti/tool-key.pem generated once (owner-only). Every
`retired-*.pem` in the same directory is published too, so a platform can still verify what the previous key
signed while it refreshes its cache of our JWKS: rotation is `mentor lti rotate-key` (or, with a configured file,
moving it to retired-<date>.pem and pointing the setting at a new one); a retired key can be deleted a day later.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mentor.errors import ConfigError
from mentor.privacy import create_private
from mentor.settings import Settings

log = logging.getLogger(__name__)

ALGORITHM = "RS256"
# 2048 bits: what 1EdTech's security framework and every LMS accept (RFC 7518 §3.3 asks for at least 2048).
KEY_BITS = 2048
GENERATED = "tool-key.pem"
RETIRED = "retired-*.pem"


def key_path(settings: Settings) -> Path:
    """The private key's file: configured, or the generated one in the data directory."""
    return settings.lti_private_key_file or settings.data_dir / "lti" / GENERATED


def thumbprint(public_jwk: dict[str, Any]) -> str:
    """The RFC 7638 thumbprint of an RSA JWK (SHA-256 of its required members in lexical order): the key id."""
    canonical = json.dumps({k: public_jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def public_jwk(private_key: rsa.RSAPrivateKey) -> dict[str, Any]:
    """The public half as a JWK with its kid, use and alg, as platforms expect in a tool's JWKS."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key()))
    return {"kty": "RSA", "e": jwk["e"], "n": jwk["n"], "kid": thumbprint(jwk), "use": "sig", "alg": ALGORITHM}


def generate_key(path: Path) -> rsa.RSAPrivateKey:
    """A new private key written to `path` (mode 600, unencrypted PEM: the data directory is the boundary)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    create_private(path)
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return key


def read_key(path: Path) -> rsa.RSAPrivateKey:
    """The RSA private key in a PEM file; ConfigError naming the file when it is not one."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: not a readable unencrypted PEM private key ({type(exc).__name__})") from None
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < KEY_BITS:
        raise ConfigError(f"{path}: LTI needs an RSA private key of at least {KEY_BITS} bits")
    return key


@dataclass(frozen=True)
class ToolKeys:
    """The signing key and the public keys to publish (the signing one first, then the retired ones)."""

    signing: rsa.RSAPrivateKey
    kid: str
    published: tuple[dict[str, Any], ...]

    def jwks(self) -> dict[str, Any]:
        """The JSON Web Key Set served at /lti/jwks."""
        return {"keys": list(self.published)}

    def sign(self, claims: dict[str, Any]) -> str:
        """A JWT of `claims` signed RS256 with the current key, its kid in the header."""
        return jwt.encode(claims, self.signing, algorithm=ALGORITHM, headers={"kid": self.kid, "typ": "JWT"})


def load_tool_keys(settings: Settings) -> ToolKeys:
    """The configured key, or the one generated on first use; with Redis or PostgreSQL the key must be configured
    (each replica would make its own, and a platform caching one replica's JWKS would refuse the others')."""
    path = key_path(settings)
    if settings.lti_private_key_file is None and settings.shared and not path.exists():
        raise ConfigError(
            "MENTOR_LTI_PRIVATE_KEY_FILE must be set when Redis or PostgreSQL is configured: every replica must sign "
            "with the same key (generate one with: mentor lti generate-key FILE)"
        )
    if path.exists():
        signing = read_key(path)
    elif settings.lti_private_key_file is not None:
        raise ConfigError(f"MENTOR_LTI_PRIVATE_KEY_FILE: {path} does not exist")
    else:
        signing = generate_key(path)
        log.info("generated the LTI tool key in %s (its public key is served at /lti/jwks)", path.resolve())
    current = public_jwk(signing)
    retired = [public_jwk(read_key(p)) for p in sorted(path.parent.glob(RETIRED)) if p != path]
    published = (current, *[k for k in retired if k["kid"] != current["kid"]])
    return ToolKeys(signing=signing, kid=current["kid"], published=published)


def rotate_key(settings: Settings) -> tuple[str, str]:
    """Retire the generated key (kept as retired-<date>-<kid>.pem, still published) and generate a new one; return
    (old kid, new kid). A configured key file is rotated by hand (docs/lti.md)."""
    if settings.lti_private_key_file is not None:
        raise ConfigError(
            "the key is MENTOR_LTI_PRIVATE_KEY_FILE: move it to retired-<date>.pem in its directory and point the "
            "setting at a new key (mentor lti generate-key FILE)"
        )
    path = key_path(settings)
    old = load_tool_keys(settings)
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    path.rename(path.with_name(f"retired-{stamp}-{old.kid[:8]}.pem"))
    new = public_jwk(generate_key(path))
    return old.kid, new["kid"]
