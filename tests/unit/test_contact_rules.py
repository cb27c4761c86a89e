"""The pure rules of contacts (domain/contacts.py): property keys and values, their types,
names, segment references in both shapes, the search prefix, and path keys."""

import uuid

import pytest

from mailsvc.domain.contacts import (
    Properties,
    check_count,
    check_types,
    contact_key,
    contact_write,
    properties_of,
    search_prefix,
    segment_refs,
)
from mailsvc.domain.errors import Invalid, NotFound

SEG = "0190f1d2-0000-7000-8000-000000000001"


@pytest.mark.parametrize(("key", "ok"), [
    ("a", True), ("_", True), ("A_1", True), ("company_name", True), ("x" * 50, True),
    ("x" * 51, False), ("1st", False), ("", False), ("a-b", False), ("a b", False), ("é", False), ("a.b", False),
])
def test_property_keys(key, ok):
    if ok:
        assert properties_of({key: "v"}).set == {key: "v"}
    else:
        with pytest.raises(Invalid) as e:
            properties_of({key: "v"})
        assert e.value.field.startswith("properties.")


@pytest.mark.parametrize(("value", "kind"), [
    ("x", "string"), ("x" * 2000, "string"), (0, "number"), (2.5, "number"), (-(2**53 - 1), "number"),
    (True, "boolean"), (False, "boolean"),
    ("x" * 2001, None), (2**53, None), (float("nan"), None), ([], None), ({}, None), ("a\x00b", None),
])
def test_property_values(value, kind):
    if kind is None:
        with pytest.raises(Invalid) as e:
            properties_of({"k": value})
        assert e.value.field == "properties.k"
    else:
        assert properties_of({"k": value}).types() == {"k": kind}


def test_null_deletes_and_counts():
    props = properties_of({"a": 1, "b": None})
    assert props == Properties({"a": 1}, ("b",))
    with pytest.raises(Invalid):
        properties_of({f"k{i}": 1 for i in range(101)})
    check_count({f"k{i}": 1 for i in range(99)}, properties_of({"new": 1}))
    with pytest.raises(Invalid):
        check_count({f"k{i}": 1 for i in range(100)}, properties_of({"new": 1}))
    check_count({f"k{i}": 1 for i in range(100)}, properties_of({"new": 1, "k0": None}))


@pytest.mark.parametrize(("known", "value", "ok"), [
    ("number", 3, True), ("number", "3", False), ("boolean", 1, False), ("number", True, False),
    ("string", "x", True), ("string", False, False), (None, True, True),
])
def test_a_key_keeps_its_first_type(known, value, ok):
    props = properties_of({"k": value})
    types = {"k": known} if known else {}
    if ok:
        check_types(props, types)
    else:
        with pytest.raises(Invalid) as e:
            check_types(props, types, "contacts[3].properties")
        assert e.value.field == "contacts[3].properties.k"


@pytest.mark.parametrize(("given", "ids"), [
    ([{"id": SEG}], (uuid.UUID(SEG),)), ([SEG], (uuid.UUID(SEG),)), ([SEG, {"id": SEG}], (uuid.UUID(SEG),)),
    (None, ()), ([], ()),
])
def test_segment_refs_in_both_shapes(given, ids):
    assert segment_refs(given) == ids


@pytest.mark.parametrize("given", ["x", [{"name": "x"}], ["not-a-uuid"], [{"id": 1}], {"id": SEG}])
def test_bad_segment_refs(given):
    with pytest.raises(Invalid):
        segment_refs(given)


@pytest.mark.parametrize(("body", "field"), [
    ({"email": "a@b.example", "first_name": "x" * 201}, "first_name"),
    ({"email": "a@b.example", "last_name": "a\nb"}, "last_name"),
    ({"email": "a@b.example", "unsubscribed": "yes"}, "unsubscribed"),
    ({"email": "a@b.example", "topics": [{"id": "t"}]}, "topics"),
    ({"first_name": "x"}, "email"),
])
def test_contact_fields(body, field):
    with pytest.raises(Invalid) as e:
        contact_write(body, creating=True)
    assert e.value.field == field


def test_a_patch_ignores_the_address_and_unknown_keys():
    write = contact_write({"id": "x", "email": "other@b.example", "audience_id": "y", "first_name": None,
                           "topics": []}, creating=False)
    assert write.email is None and write.names == {"first_name": None}
    assert contact_write({"email": " Ann@B.Example "}, creating=True).email == "ann@b.example"


@pytest.mark.parametrize(("q", "pattern"), [
    ("Ann", "ann%"), ("a_b", "a\\_b%"), ("50%", "50\\%%"), ("a\\", "a\\\\%"), ("", None), ("  ", None), (None, None),
])
def test_search_prefix(q, pattern):
    assert search_prefix(q) == pattern


def test_path_keys():
    assert contact_key(SEG) == uuid.UUID(SEG)
    assert contact_key("ANN@b.example") == "ann@b.example"
    with pytest.raises(NotFound):
        contact_key("not an address")
