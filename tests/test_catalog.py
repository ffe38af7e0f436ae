import textwrap

import pytest

from harness.catalog import CatalogError, Clause, coverage, format_coverage, load_catalog

CATALOG = """\
clauses:
  - id: ROUTING-MULTICAST-1
    source: "003_9cdc7c48796dae4f.txt §12.1.1.3"
    text: >-
      A multicast address delivers each message
      to every attached receiver.
    area: routing
  - id: ROUTING-CLOSEST-1
    source: "003_9cdc7c48796dae4f.txt §12.1.1.3"
    text: Closest sends each message to one receiver on the cheapest path.
    area: routing
  - id: LINK-DETACH-2
    source: "AMQP 1.0 §2.6.3"
    text: A detach with closed true ends the link.
    area: link-routes
"""


def write(tmp_path, text):
    path = tmp_path / "catalog.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path, text):
    with pytest.raises(CatalogError) as info:
        load_catalog(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / "catalog.yaml"))
    return message[len(str(tmp_path / "catalog.yaml")) :]


def test_loads_clauses_in_order(tmp_path):
    catalog = load_catalog(write(tmp_path, CATALOG))
    assert list(catalog) == ["ROUTING-MULTICAST-1", "ROUTING-CLOSEST-1", "LINK-DETACH-2"]
    assert catalog["ROUTING-MULTICAST-1"] == Clause(
        id="ROUTING-MULTICAST-1",
        source="003_9cdc7c48796dae4f.txt §12.1.1.3",
        text="A multicast address delivers each message to every attached receiver.",
        area="routing",
    )
    assert catalog["LINK-DETACH-2"].source == "AMQP 1.0 §2.6.3"


def test_empty_catalog_is_valid(tmp_path):
    assert load_catalog(write(tmp_path, "clauses: []\n")) == {}


ENTRY = "  - {id: A-1, source: 'AMQP 1.0 §1', text: t, area: routing"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            CATALOG + ENTRY.replace("A-1", "ROUTING-CLOSEST-1") + "}\n",
            ": clauses[3]: duplicate id 'ROUTING-CLOSEST-1' (first at clauses[1])",
        ),
        (
            "clauses:\n" + ENTRY.replace("A-1", "routing-1") + "}\n",
            ": clauses[0] (routing-1): field 'id': expected an id like ROUTING-MULTICAST-1",
        ),
        (
            "clauses:\n" + ENTRY.replace("A-1", "ROUTING") + "}\n",
            ": clauses[0] (ROUTING): field 'id': expected",
        ),
        (
            "clauses:\n" + ENTRY.replace("'AMQP 1.0 §1'", "somewhere") + "}\n",
            (
                ": clauses[0] (A-1): field 'source': expected '<seed file>.txt §<section>' or "
                "'AMQP 1.0 §<section>', got 'somewhere'"
            ),
        ),
        (
            "clauses:\n" + ENTRY.replace("text: t", "text: ''") + "}\n",
            ": clauses[0] (A-1): field 'text': expected a non-empty paraphrase, got ''",
        ),
        (
            "clauses:\n" + ENTRY.replace("area: routing", "area: Routing") + "}\n",
            ": clauses[0] (A-1): field 'area': expected a lower-case area name",
        ),
        (
            "clauses:\n" + ENTRY.replace(", area: routing", "") + "}\n",
            ": clauses[0] (A-1): field 'area': missing",
        ),
        (
            "clauses:\n" + ENTRY + ", section: x}\n",
            ": clauses[0] (A-1): field 'section': unknown field; expected one of id, source, text, area",
        ),
        ("clauses:\n  - just text\n", ": clauses[0]: expected a mapping with id, source, text, area"),
        ("clauses: {}\n", ": field 'clauses': expected a list, got dict"),
        ("clause: []\n", ": expected a mapping with a 'clauses' list, got a mapping without it"),
        ("clauses: []\nversion: 2\n", ": field 'version': unknown field; expected only 'clauses'"),
        ("", ": expected a mapping with a 'clauses' list, got NoneType"),
        ("clauses: [\n", ":2: YAML syntax error:"),
        ("clauses:\n" + ENTRY + ", id: B-2}\n", ":2: YAML syntax error: duplicate key 'id'"),
    ],
)
def test_errors_name_file_entry_and_field(tmp_path, text, expected):
    assert error_of(tmp_path, text).startswith(expected)


def test_missing_file(tmp_path):
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(tmp_path / "none.yaml")


def test_coverage(tmp_path):
    catalog = load_catalog(write(tmp_path, CATALOG))
    cov = coverage(
        catalog,
        {
            "suites/routing/test_d.py::test_multicast": ["ROUTING-MULTICAST-1", "ROUTING-MULTICAST-1"],
            "suites/routing/test_d.py::test_both": [
                "ROUTING-CLOSEST-1",
                "ROUTING-NOPE-9",
                "ROUTING-MULTICAST-1",
            ],
            "suites/routing/test_d.py::test_bare": [],
        },
    )
    assert cov.clauses == {
        "ROUTING-MULTICAST-1": [
            "suites/routing/test_d.py::test_both",
            "suites/routing/test_d.py::test_multicast",
        ],
        "ROUTING-CLOSEST-1": ["suites/routing/test_d.py::test_both"],
        "LINK-DETACH-2": [],
    }
    assert cov.uncovered == ["LINK-DETACH-2"]
    assert cov.unknown == {"suites/routing/test_d.py::test_both": ["ROUTING-NOPE-9"]}
    assert cov.untraced == ["suites/routing/test_d.py::test_bare"]
    assert not cov.complete
    assert format_coverage(cov).splitlines() == (
        [
            "spec coverage: 2/3 clauses covered by 3 cases",
            "clauses with no case (1): LINK-DETACH-2",
            "cases citing clauses not in the catalog (1):",
            "  suites/routing/test_d.py::test_both: ROUTING-NOPE-9",
            "cases citing no clause (1):",
            "  suites/routing/test_d.py::test_bare",
        ]
    )


def test_complete_coverage_is_one_line(tmp_path):
    catalog = load_catalog(write(tmp_path, CATALOG))
    cov = coverage(catalog, {"t::a": list(catalog)})
    assert cov.complete
    assert format_coverage(cov) == "spec coverage: 3/3 clauses covered by 1 cases"


def test_a_summary_names_at_most_the_uncovered_clauses_asked_for(tmp_path):
    catalog = load_catalog(write(tmp_path, CATALOG))
    cov = coverage(catalog, {})
    line = format_coverage(cov, most=1).splitlines()[1]
    assert line.startswith("clauses with no case (3): ") and line.endswith(" (+2 more; `interop catalog` lists them)")
    assert format_coverage(cov).splitlines()[1].count(",") == 2  # unbounded: all three
