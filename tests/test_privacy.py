"""Redaction of personal details and learner pseudonyms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mentor.privacy import pseudonym, redact, without_personal_details


@pytest.mark.parametrize(
    ("text", "kind", "gone"),
    [
        ("mail me at jane.doe@example.com please", "email", "jane.doe@example.com"),
        ("call +44 7700 900123 tonight", "phone", "7700 900123"),
        ("or (415) 555-0132", "phone", "555-0132"),
        ("my card 4111 1111 1111 1111 was charged", "card", "4111 1111 1111 1111"),
        ("card 4111-1111-1111-1111", "card", "4111-1111-1111-1111"),
        ("from 192.168.10.12 at work", "ip", "192.168.10.12"),
        ("via 2001:db8::8a2e:370:7334", "ip", "2001:db8::8a2e:370:7334"),
        ("clone https://bob:hunter2@git.example.com/repo.git", "url_credentials", "hunter2"),
        ("Hi, my name is Jane Doe and I'm stuck", "name", "Jane Doe"),
        ("MY NAME IS bob, what is zero", "name", "bob"),
    ],
)
def test_each_kind_is_removed_and_recorded(text: str, kind: str, gone: str) -> None:
    redacted, kinds = redact(text)
    assert gone not in redacted and kind in kinds


@pytest.mark.parametrize(
    "text",
    [
        "what about a 7B model at stage 3?",
        "fp16 max is 65504 and 65,504; min normal 6.1e-5",
        "7,000,000,000 params on 1.4T tokens need 5.88e23 FLOPs",
        "ZeRO-3 on 1024 GPUs, tp=8 pp=4, 8 micro-batches, 2^16 loss scale",
        "4 stages, 8 micro-batches: bubble 3/11",
        "Llama-2 70B int4 group size 128 at 10:30:00, ratio 1:2:4",
    ],
)
def test_module_numbers_are_left_alone(text: str) -> None:
    assert redact(text) == (text, [])


def test_without_personal_details_drops_placeholders() -> None:
    assert without_personal_details("my name is Jane, what is ZeRO? jane@x.org") == "my name is , what is ZeRO?"


def test_pseudonyms_are_stable_keyed_and_not_the_id() -> None:
    key = b"k" * 32
    assert pseudonym("learner-42", key) == pseudonym("learner-42", key)
    assert pseudonym("learner-42", key) != pseudonym("learner-43", key)
    assert pseudonym("learner-42", key) != pseudonym("learner-42", b"other key")
    assert "learner-42" not in pseudonym("learner-42", key) and len(pseudonym("learner-42", key)) == 32
    assert pseudonym(None, key) == "anonymous"


@given(st.emails())
def test_any_email_is_removed(email: str) -> None:
    redacted, kinds = redact(f"write to {email} please")
    assert email not in redacted and "email" in kinds
