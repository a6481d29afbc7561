"""The design's fingerprint covers what the analyses judge: a check's threshold (literal, module
constant, closed-over value, partial keyword) and its comparison; not the markdown they write."""
import dataclasses
import functools

from transformer_jax.studies.checks import Check
from transformer_jax.studies.design import judged_code

BOUND = 0.5


def _analysis(checks, root=None, runs=None):
    return f"### a heading\n{len(checks)} checks"  # text: not part of the description


def _make(threshold, op="ge", text="the score is high"):
    test = (lambda s: s >= threshold) if op == "ge" else (lambda s: s > threshold)
    return functools.partial(_analysis, (Check(text, "v", test),))


def test_a_moved_threshold_or_comparison_moves_the_description():
    base = judged_code.describe(_make(0.5))
    assert judged_code.describe(_make(0.5)) == base
    assert judged_code.describe(_make(0.4)) != base  # closed-over value
    assert judged_code.describe(_make(0.5, op="gt")) != base  # the comparison
    assert judged_code.describe(_make(0.5, text="another")) != base  # the check's own words


def test_literals_and_module_constants_are_read():
    literal = judged_code.describe(lambda s: s >= 0.3)
    assert literal["tree"] == ["Lambda(args=arguments(posonlyargs=[], args=[arg(arg='s')], "
                               "kwonlyargs=[], kw_defaults=[], defaults=[]), body=Compare("
                               "left=Name(id='s', ctx=Load()), ops=[GtE()], "
                               "comparators=[Constant(value=0.3)]))"]
    assert judged_code.describe(lambda s: s >= 0.4)["tree"] != literal["tree"]
    constant = judged_code.describe(lambda s: s <= BOUND)
    assert constant["constants"] == {"BOUND": 0.5}


def test_two_lambdas_on_one_line_are_told_apart():
    """The syntax tree is found by where the code stands, not only its line."""
    pair = (lambda s: s >= 0.3, lambda s: s > 0.3)
    first, second = (judged_code.describe(f)["tree"] for f in pair)
    assert len(first) == len(second) == 1 and first != second


def test_a_partial_keyword_and_a_dataclass_field_are_read():
    @dataclasses.dataclass(frozen=True)
    class Bound:
        at: float

    one = judged_code.describe(functools.partial(_analysis, bound=Bound(1.0)))
    two = judged_code.describe(functools.partial(_analysis, bound=Bound(2.0)))
    assert one != two and one["keywords"]["bound"]["at"] == 1.0


def test_the_markdown_an_analysis_writes_is_not_read():
    def one(root, runs):
        return "### heading one"

    def two(root, runs):
        return "### heading two"

    first, second = ({k: v for k, v in judged_code.describe(f).items() if k != "function"}
                     for f in (one, two))
    assert first == second
