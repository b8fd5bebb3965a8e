"""Checkpoint notes: exact text, strict parsing, Ed25519 signed-note keys and signatures."""

from __future__ import annotations

import base64
import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.integrity import checkpoint
from ledger.integrity.checkpoint import (
    Checkpoint,
    Signature,
    format_note,
    generate_signing_key,
    key_hash,
    parse_note,
    sign,
    verifier_key_for,
    verify_signature,
)

# The example of the C2SP tlog-checkpoint specification.
C2SP_EXAMPLE = (
    "example.com/behind-the-sofa\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— example.com/behind-the-sofa "
    "Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)

# The example key pair and signed note of golang.org/x/mod/sumdb/note.
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_SIGNATURE_LINE = (
    "— PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)

ROOT = bytes(range(32))
ROOT_B64 = base64.b64encode(ROOT).decode()
EMPTY_B64 = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
BODY = f"example.org/ledger\n42\n{ROOT_B64}\n"


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return generate_signing_key("example.org/ledger")


# --- format and parse ------------------------------------------------------------------


def test_body_has_the_exact_c2sp_layout():
    cp = Checkpoint("example.org/ledger", 42, ROOT)
    assert cp.body() == BODY
    assert format_note(cp) == BODY
    with_ext = Checkpoint("example.org/ledger", 42, ROOT, ("ext one", "ext two"))
    assert with_ext.body() == BODY + "ext one\next two\n"
    sig = Signature("example.org/ledger", 0x01020304, b"\xff" * 64)
    expected_sig = base64.b64encode(b"\x01\x02\x03\x04" + b"\xff" * 64).decode()
    assert format_note(cp, [sig]) == f"{BODY}\n— example.org/ledger {expected_sig}\n"


def test_c2sp_example_parses_and_reformats_byte_for_byte():
    cp, sigs = parse_note(C2SP_EXAMPLE)
    assert cp.origin == "example.com/behind-the-sofa"
    assert cp.size == 20852163
    assert cp.root == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert cp.extensions == ()
    assert [(s.name, s.key_hash, len(s.signature)) for s in sigs] == [
        ("example.com/behind-the-sofa", 0x033DE0AE, 64)
    ]
    assert format_note(cp, sigs) == C2SP_EXAMPLE


def test_empty_tree_checkpoint():
    cp, sigs = parse_note(f"log\n0\n{EMPTY_B64}\n")
    assert (cp.size, cp.root.hex()[:8], sigs) == (0, "e3b0c442", [])


origins = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=30).filter(
    lambda s: "\n" not in s
)


@given(
    origin=origins,
    size=st.integers(0, 2**63 - 1),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(origins, max_size=3),
    signatures=st.lists(
        st.builds(
            Signature,
            st.text("abcdefghijklmnopqrstuvwxyz./-0123456789", min_size=1, max_size=20),
            st.integers(0, 2**32 - 1),
            st.binary(min_size=1, max_size=80),
        ),
        max_size=4,
    ),
)
def test_round_trip(origin, size, root, extensions, signatures):
    cp = Checkpoint(origin, size, root, tuple(extensions))
    text = format_note(cp, signatures)
    assert parse_note(text) == (cp, signatures)
    assert format_note(*parse_note(text)) == text


MALFORMED = [
    ("", "checkpoint note is empty"),
    (BODY[:-1], "checkpoint note must end with a newline"),
    (BODY.replace("\n", "\r\n"), "contains a control character; only newlines are allowed"),
    (BODY + "ext\tx\n", "contains a control character"),
    ("example.org/ledger\n42\n", "needs 3 lines (origin, tree size, root hash) but has 2"),
    (f"\n42\n{ROOT_B64}\n", "checkpoint origin line is empty"),
    (f"log\n\n{ROOT_B64}\n", "needs 3 lines (origin, tree size, root hash) but has 1"),
    (f"log\n042\n{ROOT_B64}\n", "tree size '042' is not a decimal number without leading zeros"),
    (f"log\n-1\n{ROOT_B64}\n", "tree size '-1' is not a decimal number"),
    (f"log\n+1\n{ROOT_B64}\n", "tree size '+1' is not a decimal number"),
    (f"log\n 1\n{ROOT_B64}\n", "tree size ' 1' is not a decimal number"),
    (f"log\n1_000\n{ROOT_B64}\n", "tree size '1_000' is not a decimal number"),
    (f"log\n\u0661\n{ROOT_B64}\n", "is not a decimal number"),  # Arabic-Indic digit one
    (f"log\n{2**63}\n{ROOT_B64}\n", f"tree size {2**63} is too large"),
    ("log\n1\nnot base64!\n", "checkpoint root hash is not valid standard base64"),
    (f"log\n1\n{ROOT_B64.rstrip('=')}\n", "root hash is not valid standard base64"),
    (f"log\n1\n{EMPTY_B64.replace('+', '-')}\n", "root hash is not valid standard base64"),
    ("log\n1\n" + ROOT_B64[:-2] + "9=\n", "root hash is not valid standard base64"),
    ("log\n1\nAAAA\n", "checkpoint root hash must be 32 bytes but is 3"),
    (BODY + "\n", "has a blank line but no signature lines after it"),
    (BODY + "\n\n", "has a blank line but no signature lines after it"),
    (BODY + "\nnot a signature\n", "signature line 1 does not start with an em dash and a space"),
    (BODY + "\n- log AAAAAAA=\n", "signature line 1 does not start with an em dash"),
    (BODY + "\n— log AAAAAAA=\n—log AAAAAAA=\n", "signature line 2 does not start with"),
    (BODY + "\n—  AAAAAAA=\n", "signature line 1: key name is empty"),
    (BODY + "\n— a+b AAAAAAA=\n", "signature line 1: key name 'a+b' must not contain"),
    (BODY + "\n— log\n", "signature line 1: signature is not valid standard base64"),
    (BODY + "\n— log AAAA AAAA\n", "signature line 1: signature is not valid standard base64"),
    (BODY + "\n— log AAAAAA==\n", "signature line 1: signature is too short"),
    (BODY + "\n" + "— log AAAAAAA=\n" * 101, "has more than 100 signatures"),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_notes_are_rejected_with_a_clear_message(text, message):
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        parse_note(text)
    assert "\n" not in str(caught.value)


def test_empty_extension_line_is_rejected():
    # Inside a body an empty line can only come from a signed note whose last blank line
    # is further down.
    text = BODY + "\next\n\n— log AAAAAAA=\n"
    with pytest.raises(InputError, match="checkpoint extension line 4 is empty"):
        parse_note(text)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"origin": ""}, "origin must be non-empty"),
        ({"origin": "a\nb"}, "origin must be non-empty"),
        ({"size": -1}, "tree size must be within"),
        ({"root": b"short"}, "root must be 32 bytes"),
        ({"extensions": ("",)}, "extension lines must be non-empty"),
    ],
)
def test_checkpoint_rejects_impossible_values(kwargs, message):
    fields = {"origin": "log", "size": 1, "root": ROOT, **kwargs}
    with pytest.raises(ValueError, match=message):
        Checkpoint(**fields)


# --- keys ------------------------------------------------------------------------------


def test_key_hash_and_key_strings_match_the_go_note_example():
    public = base64.b64decode(GO_VERIFIER.split("+", 2)[2])[1:]
    assert key_hash("PeterNeumann", public) == 0xC74F20A3
    assert verifier_key_for(GO_SIGNER) == GO_VERIFIER


def test_signature_matches_the_go_note_example():
    # Ed25519 is deterministic, so the same key over the same text gives the same bytes.
    assert checkpoint._sign_text(GO_TEXT, GO_SIGNER).line() == GO_SIGNATURE_LINE


def test_generated_keys_have_the_note_formats(keys):
    signer, verifier = keys
    assert re.fullmatch(
        r"PRIVATE\+KEY\+example\.org/ledger\+[0-9a-f]{8}\+A[A-Za-z0-9+/]{43}", signer
    )
    assert re.fullmatch(r"example\.org/ledger\+[0-9a-f]{8}\+A[A-Za-z0-9+/]{43}", verifier)
    assert signer.split("+")[3] == verifier.split("+")[1]
    assert verifier_key_for(signer) == verifier
    assert generate_signing_key("example.org/ledger") != keys


@pytest.mark.parametrize("name", ["", "has space", "a+b", "tab\there"])
def test_key_names_are_checked(name):
    with pytest.raises(InputError, match="key name"):
        generate_signing_key(name)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "verifier key is malformed"),
        ("PeterNeumann+c74f20a3", "verifier key is malformed"),
        ("PeterNeumann+c74f20+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "malformed"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbz", "verifier key is not valid standard base64"),
        ("PeterNeumann+c74f20a3+AhpjMkFnYzJRY1VQRGhNUWVnd3hiemhLcWlCZnNW", "not an Ed25519 key"),
        ("PeterNeumann+00000000+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "does not match"),
        ("Peter+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "does not match"),
    ],
)
def test_malformed_verifier_keys_are_rejected(key, message):
    note = format_note(Checkpoint("log", 1, ROOT), [Signature("PeterNeumann", 0xC74F20A3, b"x")])
    with pytest.raises(InputError, match=re.escape(message)):
        verify_signature(note, key)


@pytest.mark.parametrize(
    "key",
    [
        GO_SIGNER.removeprefix("PRIVATE+KEY+"),
        GO_SIGNER.replace("c74f20a3", "c74f20a4"),
        GO_SIGNER.replace("PeterNeumann", "EnochRoot"),
        GO_SIGNER[:-4],
    ],
)
def test_malformed_signer_keys_are_rejected_without_echoing_the_secret(key):
    with pytest.raises(InputError, match="signer key") as caught:
        sign(Checkpoint("log", 1, ROOT), key)
    assert "AYEKFALVFGyNhPJEMzD1QIDr" not in str(caught.value)


# --- signing and verifying -------------------------------------------------------------


def test_signed_note_verifies(keys):
    signer, verifier = keys
    cp = Checkpoint("example.org/ledger", 42, ROOT)
    note = sign(cp, signer)
    assert note.startswith(BODY + "\n— example.org/ledger ")
    parsed, sigs = parse_note(note)
    assert parsed == cp
    assert len(sigs) == 1 and len(sigs[0].signature) == 64
    assert verify_signature(note, verifier)
    assert verify_signature(note, verifier + "\n")  # a key read from a file


@pytest.mark.parametrize(
    "change",
    [
        lambda note: note.replace("example.org/ledger\n", "example.org/ledgeR\n", 1),
        lambda note: note.replace("\n42\n", "\n43\n", 1),
        lambda note: note.replace(ROOT_B64, base64.b64encode(bytes(32)).decode(), 1),
        lambda note: note.replace(f"{ROOT_B64}\n", f"{ROOT_B64}\nextension\n", 1),
    ],
)
def test_any_change_of_the_body_breaks_the_signature(keys, change):
    signer, verifier = keys
    note = sign(Checkpoint("example.org/ledger", 42, ROOT), signer)
    changed = change(note)
    assert changed != note
    assert not verify_signature(changed, verifier)


def test_a_changed_signature_fails(keys):
    signer, verifier = keys
    cp, sigs = parse_note(sign(Checkpoint("example.org/ledger", 42, ROOT), signer))
    for position in (0, 31, 63):
        raw = bytearray(sigs[0].signature)
        raw[position] ^= 0x01
        bad = Signature(sigs[0].name, sigs[0].key_hash, bytes(raw))
        assert not verify_signature(format_note(cp, [bad]), verifier)
    short = Signature(sigs[0].name, sigs[0].key_hash, sigs[0].signature[:63])
    assert not verify_signature(format_note(cp, [short]), verifier)


def test_another_key_does_not_verify(keys):
    signer, _ = keys
    _, other_same_name = generate_signing_key("example.org/ledger")
    _, other_name = generate_signing_key("example.org/other")
    note = sign(Checkpoint("example.org/ledger", 42, ROOT), signer)
    assert not verify_signature(note, other_same_name)
    assert not verify_signature(note, other_name)
    assert not verify_signature(BODY, keys[1])  # unsigned


def test_cosigning_keeps_other_signatures_and_replaces_own(keys):
    signer, verifier = keys
    witness_signer, witness_verifier = generate_signing_key("witness.example/w1")
    once = sign(Checkpoint("example.org/ledger", 42, ROOT), signer)
    twice = sign(once, witness_signer)
    assert twice.startswith(once)
    assert verify_signature(twice, verifier)
    assert verify_signature(twice, witness_verifier)
    again = sign(twice, signer)
    assert len(parse_note(again)[1]) == 2
    assert verify_signature(again, verifier)
    # A second signature by the same key that fails makes the key's verdict False.
    cp, sigs = parse_note(twice)
    forged = Signature(sigs[0].name, sigs[0].key_hash, bytes(64))
    assert not verify_signature(format_note(cp, [*sigs, forged]), verifier)


def test_signing_without_the_optional_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric", None)
    message = "signing needs the optional 'sign' extra: pip install 'kernel-ledger[sign]'"
    with pytest.raises(InputError, match=re.escape(message)):
        generate_signing_key("example.org/ledger")
    with pytest.raises(InputError, match=re.escape(message)):
        sign(Checkpoint("log", 1, ROOT), GO_SIGNER)
    note = format_note(Checkpoint("log", 1, ROOT), [Signature("PeterNeumann", 0xC74F20A3, b"x")])
    with pytest.raises(InputError, match=re.escape(message)):
        verify_signature(note, GO_VERIFIER)
    assert parse_note(C2SP_EXAMPLE)[0].size == 20852163  # parsing never needs it
