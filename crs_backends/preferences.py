"""When the person is leaving: a goodbye is a message that only thanks or takes leave ("Thanks, bye!", "Great,
thanks!", "That's all, see you"); it gets a goodbye and no recommendation. The request reader
(:mod:`crs_backends.request_reader`) reads it with :func:`is_goodbye` for ChatCRS and the retrieval baseline, which
read the person's dislikes there too.
"""

from __future__ import annotations

import re

_APPROVAL = r"(?:ok(?:ay)?|great|perfect|cool|awesome|nice|alright|all right|sounds good|good|wonderful|excellent)"
_THANKS = r"(?:thanks?(?: you)?(?: so much| a lot| very much)?|thx|ty|cheers|much appreciated|appreciate it)"
_LEAVE = (
    r"(?:that'?s all|that is all|that'?s it|i'?m (?:good|done|all set)|i am (?:good|done|all set)|"
    r"no(?:,)? thanks?|nothing else|i'?ll (?:watch|check out|try) (?:it|that|those|them|one)(?: tonight)?|"
    r"i'?ll check (?:it|that|those|them) out|"
    r"good ?bye|bye(?: ?bye)?|see (?:you|ya)(?: later)?|have a (?:good|nice|great) (?:one|day|night|evening)|"
    r"take care|later|gotta go|i have to go|i need to go)"
)
_GOODBYE = re.compile(
    rf"^(?:{_APPROVAL}[\s,!.]*)*(?:(?:{_THANKS}|{_LEAVE})[\s,!.]*)+$",
    re.IGNORECASE,
)


def is_goodbye(text: str) -> bool:
    """Whether ``text`` only thanks or takes leave ("Thanks, bye!", "Great, thanks!", "That's all. See you!"): it
    gets "you're welcome" and no more films. A thanks followed by anything else ("Thanks! Anything else like it?")
    asks on."""
    cleaned = " ".join((text or "").replace("’", "'").split()).strip()
    return bool(cleaned) and bool(_GOODBYE.match(cleaned))
