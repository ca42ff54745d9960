"""Values mean what they say: one-pass substitution, front matter taken as written, fences that are what they look."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ci.core.plan import substitute

FENCE = "```"


def test_a_loaded_value_is_pasted_as_it_is_whatever_the_order_of_the_loads(guide_runner) -> None:
    run = guide_runner(
        f"""
        {FENCE}shell #test-setup store="a"
        printf 'x<B>y'
        {FENCE}

        {FENCE}shell #test-setup store="b"
        printf '<A><A><A>'
        {FENCE}

        {FENCE}shell #test id="ab" load="a>>A" load="b>>B"
        echo '<A>|<B>'
        {FENCE}

        {FENCE}shell #test-result id="ab"
        x<B>y|<A><A><A>
        {FENCE}

        {FENCE}shell #test id="ba" load="b>>B" load="a>>A"
        echo '<A>|<B>'
        {FENCE}

        {FENCE}shell #test-result id="ba"
        x<B>y|<A><A><A>
        {FENCE}

        {FENCE}shell #test id="expected"
        echo 'x<B>y'
        {FENCE}

        {FENCE}shell #test-result id="expected" load="a>>A" load="b>>B"
        <A>
        {FENCE}
        """,
        "--keep-going",
    )
    assert run.statuses() == {"a": "passed", "b": "passed", "ab": "passed", "ba": "passed", "expected": "passed"}, (
        run.stdout
    )


_PLACEHOLDERS = st.sampled_from(["A", "B", "AB", "A>"])


@given(
    text=st.text("<>AB x", max_size=30),
    loads=st.lists(st.tuples(_PLACEHOLDERS, st.text("<>AB x", max_size=12)), max_size=4),
)
@settings(max_examples=300, deadline=None)
def test_substitution_is_one_pass_over_the_text(text: str, loads: list[tuple[str, str]]) -> None:
    result = substitute(text, tuple(loads))
    # the order of distinct placeholders does not matter, and nothing grows beyond the values pasted once
    first: dict[str, str] = {}
    for placeholder, value in loads:
        first.setdefault(placeholder, value)
    assert substitute(text, tuple(reversed(list(first.items())))) == result
    longest = max((len(value) for value in first.values()), default=0)
    assert len(result) <= len(text) * max(longest, 1)
    # a value holding placeholders comes out as it is
    if len(first) == 1 and text == f"<{next(iter(first))}>":
        assert result == next(iter(first.values()))
