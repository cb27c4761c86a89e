"""The suppression list's pure rules: the normal form, the origin order, request bodies."""

import uuid

import pytest

from mailsvc.domain.errors import Invalid
from mailsvc.domain.suppression import (
    ORIGINS_BY_STRENGTH,
    batch_addresses,
    batch_ids,
    normal_form,
    origin_filter,
    removal,
    stronger,
)


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("bob@example.com", "bob@example.com"),
        ("Bob@Example.COM", "bob@example.com"),
        ("  BOB@example.com\t", "bob@example.com"),
        ("bob@example.com.", "bob@example.com"),
        ("bob@Bücher.DE", "bob@xn--bcher-kva.de"),
        ("bob@xn--bcher-kva.de", "bob@xn--bcher-kva.de"),
        ('"Bob"@example.com', "bob@example.com"),
        ('"b\\ob.x"@example.com', "bob.x@example.com"),
        ('"Bob Smith"@example.com', '"bob smith"@example.com'),
        ("a/b@example.com", "a/b@example.com"),
        # Dots and tags are the receiving system's business: kept, for every provider.
        ("John.Doe+News@Gmail.com", "john.doe+news@gmail.com"),
    ],
)
def test_normal_form(given, normal):
    assert normal_form(given) == normal


def test_spellings_of_one_mailbox_share_the_normal_form_and_others_do_not():
    assert len({normal_form(a) for a in ["Ann@Example.com", "ann@EXAMPLE.com.", '"ann"@example.com']}) == 1
    distinct = ["john.doe@gmail.com", "johndoe@gmail.com", "johndoe+x@gmail.com"]
    assert len({normal_form(a) for a in distinct}) == 3


@pytest.mark.parametrize(
    "bad", [None, 5, "", "bob", "bob@", "@example.com", "bob@example", "bob@@example.com",
            "bo b@example.com", "bob@exa_mple.com", "x" * 65 + "@example.com"]
)
def test_normal_form_refuses_what_is_no_address(bad):
    with pytest.raises(Invalid) as e:
        normal_form(bad, "to")
    assert e.value.field == "to" and e.value.message.startswith("to ")


def test_origin_strength_order():
    assert ORIGINS_BY_STRENGTH == ("manual", "unsubscribe", "hard_bounce", "complaint")
    assert stronger("complaint", "hard_bounce")
    assert stronger("hard_bounce", "unsubscribe")
    assert stronger("unsubscribe", "manual")
    assert not stronger("manual", "complaint")
    assert not stronger("hard_bounce", "hard_bounce")


def test_origin_filter():
    assert origin_filter(None) is None
    for origin in ORIGINS_BY_STRENGTH:
        assert origin_filter(origin) == origin
    assert origin_filter("bounce") == "hard_bounce"  # the compatible API's spelling
    for bad in ["", "Manual", "soft_bounce"]:
        with pytest.raises(Invalid) as e:
            origin_filter(bad)
        assert e.value.field == "origin"


def test_batch_addresses_limits_and_dedup():
    assert batch_addresses(["B@x.com", "b@X.com", "c@x.com"]) == ["b@x.com", "c@x.com"]
    assert len(batch_addresses([f"u{i}@x.com" for i in range(100)])) == 100
    for bad, field, words in [
        (None, "emails", "required"),
        ("a@x.com", "emails", "array"),
        ([], "emails", "between 1 and 100"),
        ([f"u{i}@x.com" for i in range(101)], "emails", "between 1 and 100"),
        (["a@x.com", "nope"], "emails[1]", "valid email"),
        (["a@x.com", 7], "emails[1]", "string"),
    ]:
        with pytest.raises(Invalid) as e:
            batch_addresses(bad)
        assert e.value.field == field and e.value.message.startswith(field), bad
        assert words in e.value.message


def test_batch_ids():
    first, second = uuid.uuid4(), uuid.uuid4()
    assert batch_ids([str(first), str(second), str(first)]) == [first, second]
    with pytest.raises(Invalid) as e:
        batch_ids([str(first), "not-a-uuid"])
    assert e.value.field == "ids[1]"
    with pytest.raises(Invalid):
        batch_ids([str(uuid.uuid4()) for _ in range(101)])


def test_removal_takes_emails_or_ids_never_both():
    some_id = uuid.uuid4()
    assert removal({"emails": ["A@x.com"]}) == (["a@x.com"], [])
    assert removal({"ids": [str(some_id)], "emails": None}) == ([], [some_id])
    for body, words in [({}, "required"), ({"emails": ["a@x.com"], "ids": [str(some_id)]}, "together")]:
        with pytest.raises(Invalid) as e:
            removal(body)
        assert e.value.field == "emails" and words in e.value.message
