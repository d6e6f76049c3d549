"""The page's section on what the host answered (the summary's ``answers``): the same figures and warning as the
text report's "Answers" block (replay.reports.text_report)."""

from __future__ import annotations

from replay.reports.html_page import Section, note, pct, table
from replay.reports.report_input import RunReport


def answers(rep: RunReport) -> Section | None:
    """The answer checks' shares, each over the calls its check covered; None when no call was checked."""
    a = rep.summary.get("answers")
    if not a:
        return None
    why = ", ".join(f"{k} {v}" for k, v in a["short_by_reason"].items() if v)
    degenerate = pct(a["degenerate_share"]) if a["text_checked"] else "not checked (--check-answers)"
    short = f"{pct(a['short_share'])} ({a['length_short']:,} of {a['length_checked']:,}{': ' + why if why else ''})"
    rows = [
        ["calls checked", f"{a['checked']:,}"],
        ["shorter than asked", short],
        ["tool calls invalid", f"{pct(a['tool_call_invalid_share'])} (of {a['tool_calls_made']:,})"],
        ["empty", pct(a["empty_share"])],
        ["degenerate", degenerate],
    ]
    body = table(["figure", "value"], rows)
    if a["forced"] is False:
        body += note(
            f"--force-output-length was not honoured: {a['length_short']} of {a['length_checked']} answers were "
            "shorter than asked (stop: the host ignored ignore_eos; lowered: it cut max_tokens to fit its context); "
            "the load is lighter than the run claims."
        )
    return Section("answers", "Answers", body)
