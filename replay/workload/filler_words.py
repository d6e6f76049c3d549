"""The words stand-in text is made of (the importers' block text, the padding of unrecorded context): common
programming words, each exactly one token of the default tokenizer, so a text of N of them is N tokens."""

from __future__ import annotations

from functools import cache

from replay.workload.tokens import DEFAULT_TOKENIZER

# Neutral English words, each one cl100k token with a leading space (checked at load; the few that are not
# are dropped). A fixed list rather than the tokenizer's vocabulary, which is web text and not all printable.
_WORDS = """
value index buffer cache thread request response server client token block prefix memory vector matrix tensor
kernel device stream queue batch model layer weight input output config option module package import export
function method class object string number integer float boolean array list map set tuple record field column
table row query schema parser compiler runtime process signal event handler callback promise future task worker
pool lock channel socket port host route path file folder directory archive format encode decode hash digest
random seed sample metric counter timer window range limit offset cursor page size length width height depth
count total average median minimum maximum score rank level state status error warning notice debug trace log
message header body footer title label name type kind mode version release build test check verify result report
summary detail note comment document section chapter paragraph line word letter symbol character byte bit run
read write load store fetch send receive open close start stop create delete update insert select merge split
join sort filter apply reduce scan parse render compute measure schedule allocate acquire retry cancel commit
rollback flush sync copy move rename match search replace print return yield raise catch handle resolve reject
connect listen accept bind mount install deploy configure enable disable toggle refresh reload restart resume
pause wait sleep notify publish subscribe emit collect gather scatter broadcast shuffle partition replicate
shard balance scale grow shrink expand compress extract transform convert validate normalize register lookup
garden river mountain forest ocean cloud bridge tower door chair paper pencil book music color light green blue
yellow orange purple silver golden winter summer spring autumn morning evening island valley desert planet
harbor market village city street station train plane ship engine wheel circle square triangle point angle shape
pattern sound voice story idea plan goal step key box bag cup plate bread apple lemon coffee water stone metal
wood glass sand snow rain wind storm lake pond hill road lane avenue castle palace temple museum library school
office factory farm kitchen room hall floor roof wall corner edge center middle top bottom left right north
south east west inside outside above below before after during between across along around through under over
near far early late quick slow simple complex small large tiny huge short long wide narrow thin thick heavy soft
hard warm cold fresh clean clear bright dark quiet loud calm steady gentle careful rapid smooth rough sharp flat
round empty full closed public private local global remote direct indirect primary secondary final initial
common rare basic advanced modern classic natural digital manual automatic static dynamic stable active passive
visible hidden current previous next first second third fourth fifth sixth seventh eighth ninth tenth hundred
thousand million single double triple half quarter zero one two three four five six seven eight nine ten eleven
twelve twenty thirty forty fifty sixty seventy eighty ninety system network service storage database cluster
region zone node graph tree branch leaf root trunk flower fruit plant animal bird fish horse tiger lion eagle
whale dolphin rabbit turtle bear wolf fox deer owl bee ant spider butterfly dragon unicorn robot rocket
satellite telescope microscope camera screen keyboard mouse monitor printer speaker phone tablet laptop computer
program software hardware interface protocol standard framework platform browser editor terminal console shell
script command argument parameter variable constant expression statement condition loop case switch default
namespace scope context environment session user account profile group team member owner admin guest visitor
customer partner vendor supplier product item order invoice payment price cost budget revenue profit income
expense ledger journal entry audit review approval proposal contract agreement policy rule guideline principle
practice procedure workflow pipeline stage phase milestone deadline calendar meeting agenda minutes decision
action priority impact risk issue problem solution answer question topic subject theme concept theory approach
technique strategy tactic design structure architecture component element feature property attribute quality
quantity unit dimension area volume mass speed velocity pressure temperature energy power force motion rhythm
harmony melody chord tempo beat song album artist painter writer author poet reader student teacher professor
doctor nurse engineer builder designer developer tester manager leader captain pilot driver sailor farmer baker
cook chef waiter plumber tailor
"""


@cache
def vocabulary() -> tuple[str, ...]:
    """The words blocks are made of, each exactly one cl100k token (fixed for a given encoding)."""
    import tiktoken

    enc = tiktoken.get_encoding(DEFAULT_TOKENIZER.partition(":")[2])
    words: list[str] = []
    for w in _WORDS.split():
        word = " " + w
        if word not in words and len(enc.encode(word, disallowed_special=())) == 1:
            words.append(word)
    return tuple(words)
