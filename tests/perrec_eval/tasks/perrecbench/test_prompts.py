"""Rendering equals PROTOCOL §3–4 byte for byte; templates are validated; bad input gets a clear error.

Every expected string here is typed by hand from PROTOCOL §4 (Python literals joined by `+`, as the
protocol writes them), never produced by the code under test.
"""

from __future__ import annotations

import hashlib
import shutil
from importlib import resources
from pathlib import Path

import pytest

from perrec_eval.tasks.perrecbench import prompts
from perrec_eval.tasks.perrecbench.prompts import (
    Demonstration,
    TemplateError,
    load_templates,
    render,
    render_profile,
)
from perrec_eval.tasks.perrecbench.records import HistoryItem, Query, UserView

# ---------------------------------------------------------------- fixtures: inputs
BOOK = Query("B1", "The Women: A Novel", "Kristin Hannah")
HOME = Query("H1", "Keurig K-Slim Coffee Maker, Single Serve, Scarlet Red")  # no author
HOME_NONE = Query("H1", "Keurig K-Slim Coffee Maker, Single Serve, Scarlet Red", "")  # an empty author


def item(title: str, rating: float, author: str | None = None) -> HistoryItem:
    return HistoryItem(None, title, author, rating, 0)


ANN = UserView(
    (item("The Nightingale", 5.0, "Kristin Hannah"), item("Coffee Grinder", 2)),
    most_common_rating=5.0,
    avg_rating=3.94,
    profile="Reads historical fiction and rates generously.",
)
BOB = UserView(
    (item("Gone Girl", 4.0, "Gillian Flynn"),),
    most_common_rating=4,
    avg_rating=4.25,
    profile="Prefers thrillers; harsh on romance.",
)
CAT = UserView(
    (item("Milk Frother", 1.0), item("Pepper Mill", 3.0, ""), item("Toaster Oven", 5.0)),
    most_common_rating=1.0,
    avg_rating=2.06,
    profile="Buys kitchen gadgets.",
)

# ---------------------------------------------------------------- hand-typed pieces of PROTOCOL §4
Q_BOOK = (
    "<|The Start of Query Item Information|>\n### Item Title\nThe Women: A Novel\n"
    + "### Item Author\nKristin Hannah\n"
    + "<|The End of Query Item Information|>"
)
Q_HOME = (
    "<|The Start of Query Item Information|>\n### Item Title\n"
    + "Keurig K-Slim Coffee Maker, Single Serve, Scarlet Red\n"
    + "<|The End of Query Item Information|>"
)
PROFILE = {
    "ANN": "## User Profile\nReads historical fiction and rates generously.\n\n"
    + "## User Most Common Rating\n5.0\n\n## User Average Rating\n3.9\n",
    "BOB": "## User Profile\nPrefers thrillers; harsh on romance.\n\n## User Most Common Rating\n4.0\n\n"
    + "## User Average Rating\n4.2\n",
    "CAT": "## User Profile\nBuys kitchen gadgets.\n\n## User Most Common Rating\n1.0\n\n"
    + "## User Average Rating\n2.1\n",
}


def items(name: str, tag: str = "User") -> list[str]:
    """H1..Hk of a fixture user, typed by hand; `tag` is "User" or "User{i}" (listwise)."""
    table = {
        "ANN": [
            "### Item Title\nThe Nightingale\n### Item Author\nKristin Hannah\n### " + tag + " Rating\n5.0",
            "### Item Title\nCoffee Grinder\n### " + tag + " Rating\n2.0",
        ],
        "BOB": ["### Item Title\nGone Girl\n### Item Author\nGillian Flynn\n### " + tag + " Rating\n4.0"],
        "CAT": [
            "### Item Title\nMilk Frother\n### " + tag + " Rating\n1.0",
            "### Item Title\nPepper Mill\n### " + tag + " Rating\n3.0",
            "### Item Title\nToaster Oven\n### " + tag + " Rating\n5.0",
        ],
    }
    return table[name]


SYSTEM_POINTWISE = (
    "Act as a personalized product recommender system. Below is a list of user's rating history, shown in "
    "[User History]. Your task is to predict the user's rating for the query item, which is described in "
    "[Query Item Details]. Analyze each user's preferences for the query item based on their historical "
    "ratings to generate the prediction. Output a predicted rating ranging from 1 to 5, where 1 being not "
    "recommended and 5 being highly recommended. The final answer should strictly follow this JSON "
    'structure: {"predicted_rating": <rating>}, do not generate anything else.'
)
SYSTEM_PAIRWISE = (
    "Act as a personalized product recommender system. Below is a pair of users, [User A] and [User B], each "
    "with their rating history. Your task is to determine which user is more likely to prefer the query "
    "item, based on its details in [Query Item Details]. Analyze each user\u2019s preferences for the query "
    "item using their historical ratings and output the user more likely to prefer the query item."
)
SYSTEM_LISTWISE = (
    "Act as a personalized product recommender system. Below is a group of users accompanied with each "
    "user's rating history, shown in [Users]. Your task is to rank these users based on their preference of "
    "the query item, which is described in [Query Item Details]. Analyze each user's preferences for the "
    "query item based on their historical ratings to generate this ranking. Output the list of user indices "
    "(e.g., 1 for User1), ranked from highest to lowest preference for the query item. The final output "
    "should rank users from most preferred to least preferred for the query item and adhere to the JSON "
    'structure shown below: {"predicted_ranking": <user_ranking>}'
)
# Appendix E as released (0ours0_sys_cot.txt): U+2019 in the steps, real line breaks, tabs in listwise.
SYSTEM_POINTWISE_COT = (
    "To predict a user\u2019s rating for a query item, follow these steps:\n"
    "1. Analyze the user\u2019s preference for the query item using their history and profile.\n"
    "2. Predict the user\u2019s rating for the query item: If the item is likely preferred by the user, the "
    "predicted rating should be higher than the user\u2019s average rating. If the item is unlikely to be "
    "preferred by the user, the predicted rating should be lower than the user\u2019s average rating.\n"
    "Act as a personalized product recommender system. Below is a list of user's rating history, shown in "
    "[User History]. Your task is to predict the user's rating for the query item, which is described in "
    "[Query Item Details]. Analyze each user's preferences for the query item based on their historical "
    "ratings to generate the prediction. Output a predicted rating ranging from 1 to 5, where 1 being not "
    "recommended and 5 being highly recommended. The final answer must strictly follow this JSON "
    'structure: {"predicted_rating": <rating>}.'
)
SYSTEM_LISTWISE_COT = (
    "To rank user preferences, follow these steps:\n"
    "1.\tPredict the rating of the query item for each user.\n"
    "2.\tCalculate the relative rating by subtracting each user\u2019s average rating from the predicted "
    "rating.\n"
    "3.\tRank user preferences based on the relative ratings: users with higher relative ratings should be "
    "ranked higher, while those with lower relative ratings should be ranked lower.\n"
    "Act as a personalized product recommender system. Below is a group of users accompanied with each "
    "user's rating history, shown in [Users]. Your task is to rank these users based on their preference of "
    "the query item, which is described in [Query Item Details]. Analyze each user's preferences for the "
    "query item based on their historical ratings to generate this ranking. Output the list of user indices "
    "(e.g., 1 for User1), ranked from highest to lowest preference for the query item. The final output "
    "should rank users from most preferred to least preferred for the query item and adhere to the JSON "
    'structure shown below: {"predicted_ranking": <user_ranking>}'
)
PAIRWISE_TAIL = (
    'Which user prefer the query item more? Output only "[User A]" or "[User B]", do not generate '
    "anything else:"
)
PAIRWISE_COT_TAIL = (
    "Which user prefer the query item more? First provide a short thinking step, then output your final "
    'answer in "[User A]" or "[User B]".' + "\nAnswer: "
)
LISTWISE_TAIL = (
    "The answer ranks users from most preferred to least preferred for the query item and adhere to the "
    "following JSON format, output the list of user indices (e.g., 1 for User1), do not include any "
    'additional information: {"predicted_ranking": <user_ranking>}' + "\nAnswer:"
)
LISTWISE_COT_TAIL = (
    "The answer ranks users from most preferred to least preferred for the query item and adhere to the "
    "following JSON format, output the list of user indices (e.g., 1 for User1): "
    '{"predicted_ranking": <user_ranking>}' + "\nAnswer: Let's think step by step."
)


# ---------------------------------------------------------------- PROTOCOL §4 formulas, typed by hand
def expected_pointwise(name: str, profile: bool, q: str, cot: bool) -> str:
    return (
        "[User History]\n<|The Start of User Data|>\n"
        + (PROFILE[name] if profile else "")
        + "".join("\n" + h + "\n" for h in items(name))
        + "<|The End of User Data|>\n"
        + "\n\n[Query Item Details]\n"
        + q
        + ("\n\nAnswer: Let's think step by step." if cot else "\n\nAnswer:")
    )


def pairwise_block(name: str, profile: bool) -> str:
    return (
        "<|The Start of User Data|>\n"
        + (PROFILE[name] if profile else "")
        + "".join("\n" + h + "\n\n" for h in items(name))
        + "<|The End of User Data|>\n"
    )


def expected_pairwise(a: str, b: str, profile: bool, q: str, cot: bool) -> str:
    return (
        "[User A]\n"
        + pairwise_block(a, profile)
        + "\n\n[User B]\n"
        + pairwise_block(b, profile)
        + "\n\n\n[Query Item Details]\n"
        + q
        + "\n\n"
        + (PAIRWISE_COT_TAIL if cot else PAIRWISE_TAIL)
    )


def listwise_block(i: int, name: str, profile: bool) -> str:
    return (
        f"<|The Start of User{i} Data|>\n"
        + (PROFILE[name] if profile else "")
        + "".join("\n" + h + "\n" for h in items(name, f"User{i}"))
        + f"<|The End of User{i} Data|>\n\n"
    )


def expected_listwise(names: list[str], profile: bool, q: str, cot: bool) -> str:
    return (
        "[Users]\n"
        + "".join(listwise_block(i, name, profile) for i, name in enumerate(names, start=1))
        + "\n\n[Query Item Details]\n"
        + q
        + "\n\n"
        + (LISTWISE_COT_TAIL if cot else LISTWISE_TAIL)
    )


USERS = {"ANN": ANN, "BOB": BOB, "CAT": CAT}
QUERIES = {"book": (BOOK, Q_BOOK), "home": (HOME, Q_HOME), "home_none": (HOME_NONE, Q_HOME)}
VARIANT_FLAGS = {
    "default": (True, False),
    "no_profile": (False, False),
    "cot": (True, True),
    "cot_no_profile": (False, True),
}
SYSTEMS = {
    ("pointwise", False): SYSTEM_POINTWISE,
    ("pointwise", True): SYSTEM_POINTWISE_COT,
    ("pairwise", False): SYSTEM_PAIRWISE,
    ("pairwise", True): SYSTEM_PAIRWISE,  # the released CoT run kept the default pairwise system prompt
    ("listwise", False): SYSTEM_LISTWISE,
    ("listwise", True): SYSTEM_LISTWISE_COT,
}


def expected(method: str, names: list[str], profile: bool, q: str, cot: bool) -> str:
    if method == "pointwise":
        return expected_pointwise(names[0], profile, q, cot)
    if method == "pairwise":
        return expected_pairwise(names[0], names[1], profile, q, cot)
    return expected_listwise(names, profile, q, cot)


CASES = [
    (method, names, variant, query)
    for method, groups in {
        "pointwise": [["ANN"], ["BOB"], ["CAT"]],
        "pairwise": [["ANN", "BOB"], ["CAT", "ANN"]],
        "listwise": [["ANN", "BOB"], ["CAT", "ANN", "BOB"]],
    }.items()
    for names in groups
    for variant in prompts.VARIANTS
    for query in QUERIES
]


@pytest.mark.parametrize(("method", "names", "variant", "query"), CASES)
def test_prompts_render_matches_protocol_byte_for_byte(method, names, variant, query):
    profile, cot = VARIANT_FLAGS[variant]
    query_input, query_block = QUERIES[query]
    messages = render(method, query_input, [USERS[n] for n in names], variant=variant)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEMS[(method, cot)]
    assert messages[1]["content"] == expected(method, names, profile, query_block, cot)


# ---------------------------------------------------------------- fully literal goldens (no composition)
def test_prompts_pointwise_default_golden():
    user = render("pointwise", BOOK, [ANN])[1]["content"]
    assert user == (
        "[User History]\n<|The Start of User Data|>\n## User Profile\nReads historical fiction and rates "
        "generously.\n\n## User Most Common Rating\n5.0\n\n## User Average Rating\n3.9\n\n### Item Title\n"
        "The Nightingale\n### Item Author\nKristin Hannah\n### User Rating\n5.0\n\n### Item Title\n"
        "Coffee Grinder\n### User Rating\n2.0\n<|The End of User Data|>\n\n\n[Query Item Details]\n"
        "<|The Start of Query Item Information|>\n### Item Title\nThe Women: A Novel\n### Item Author\n"
        "Kristin Hannah\n<|The End of Query Item Information|>\n\nAnswer:"
    )


def test_prompts_pairwise_no_profile_golden():
    user = render("pairwise", HOME, [ANN, BOB], variant="no_profile")[1]["content"]
    assert user == (
        "[User A]\n<|The Start of User Data|>\n\n### Item Title\nThe Nightingale\n### Item Author\n"
        "Kristin Hannah\n### User Rating\n5.0\n\n\n### Item Title\nCoffee Grinder\n### User Rating\n2.0\n\n"
        "<|The End of User Data|>\n\n\n[User B]\n<|The Start of User Data|>\n\n### Item Title\nGone Girl\n"
        "### Item Author\nGillian Flynn\n### User Rating\n4.0\n\n<|The End of User Data|>\n\n\n\n"
        "[Query Item Details]\n<|The Start of Query Item Information|>\n### Item Title\n"
        "Keurig K-Slim Coffee Maker, Single Serve, Scarlet Red\n<|The End of Query Item Information|>\n\n"
        'Which user prefer the query item more? Output only "[User A]" or "[User B]", do not generate '
        "anything else:"
    )


def test_prompts_listwise_cot_golden():
    user = render("listwise", BOOK, [ANN, BOB, CAT], variant="cot")[1]["content"]
    assert user == (
        "[Users]\n<|The Start of User1 Data|>\n## User Profile\nReads historical fiction and rates "
        "generously.\n\n## User Most Common Rating\n5.0\n\n## User Average Rating\n3.9\n\n### Item Title\n"
        "The Nightingale\n### Item Author\nKristin Hannah\n### User1 Rating\n5.0\n\n### Item Title\n"
        "Coffee Grinder\n"
        "### User1 Rating\n2.0\n<|The End of User1 Data|>\n\n<|The Start of User2 Data|>\n## User Profile\n"
        "Prefers thrillers; harsh on romance.\n\n## User Most Common Rating\n4.0\n\n## User Average Rating\n"
        "4.2\n\n### Item Title\nGone Girl\n### Item Author\nGillian Flynn\n### User2 Rating\n4.0\n"
        "<|The End of User2 Data|>\n\n<|The Start of User3 Data|>\n## User Profile\nBuys kitchen gadgets.\n\n"
        "## User Most Common Rating\n1.0\n\n## User Average Rating\n2.1\n\n### Item Title\nMilk Frother\n"
        "### User3 Rating\n1.0\n\n### Item Title\nPepper Mill\n### User3 Rating\n3.0\n\n### Item Title\n"
        "Toaster Oven\n### User3 Rating\n5.0\n<|The End of User3 Data|>\n\n\n\n[Query Item Details]\n"
        "<|The Start of Query Item Information|>\n### Item Title\nThe Women: A Novel\n### Item Author\n"
        "Kristin Hannah\n<|The End of Query Item Information|>\n\nThe answer ranks users from most preferred "
        "to least preferred for the query item and adhere to the following JSON format, output the list of "
        'user indices (e.g., 1 for User1): {"predicted_ranking": <user_ranking>}\nAnswer: Let\'s think step '
        "by step."
    )


def test_prompts_pairwise_system_has_right_single_quotation_mark():
    system = render("pairwise", BOOK, [ANN, BOB])[0]["content"]
    assert "each user\u2019s preferences" in system
    assert "user's" not in system


def test_prompts_pairwise_cot_ends_with_answer_and_one_space():
    user = render("pairwise", BOOK, [ANN, BOB], variant="cot")[1]["content"]
    assert user.endswith('"[User A]" or "[User B]".\nAnswer: ')


def test_prompts_pairwise_order_is_a_then_b():
    ab = render("pairwise", BOOK, [ANN, BOB], variant="no_profile")[1]["content"]
    ba = render("pairwise", BOOK, [BOB, ANN], variant="no_profile")[1]["content"]
    assert ab.index("The Nightingale") < ab.index("Gone Girl")
    assert ba.index("Gone Girl") < ba.index("The Nightingale")


# ---------------------------------------------------------------- profile request (PROTOCOL §3)
PROFILE_INSTRUCTION = (
    "### Task Instruction\nYou are given a list of user behavior history data. Your task is to analyze "
    "this data and create a user profile that describes the user's preferences, interests, and patterns "
    "of behavior. "
    "This profile should be written in a concise and coherent narrative form. Only generate user profile "
    "without any additional characters or formatting. "
)


def test_prompts_render_profile_golden():
    messages = render_profile(ANN.history)
    assert messages == [
        {
            "role": "user",
            "content": "### User Behavior history\n### Item Title\nThe Nightingale\n### Item Author\n"
            "Kristin Hannah\n### User Rating\n5.0\n\n### Item Title\nCoffee Grinder\n### User Rating\n2.0\n\n"
            + PROFILE_INSTRUCTION,
        }
    ]


def test_prompts_profile_template_ends_with_one_space_no_newline():
    content = render_profile(CAT.history)[0]["content"]
    assert content.endswith("formatting. ")
    assert not content.endswith("formatting.  ") and not content.endswith("\n")


def test_prompts_render_profile_has_no_system_message():
    assert [m["role"] for m in render_profile(BOB.history)] == ["user"]


def test_prompts_render_profile_rejects_empty_history():
    with pytest.raises(ValueError, match="non-empty list"):
        render_profile([])


# ---------------------------------------------------------------- few-shot
def test_prompts_demonstrations_become_prior_turns_with_true_answers():
    demos = [
        Demonstration(query=HOME, users=[CAT], answer=4),
        Demonstration(query=BOOK, users=[BOB], answer=2.0),
    ]
    messages = render("pointwise", BOOK, [ANN], demonstrations=demos)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"] == SYSTEM_POINTWISE
    assert messages[1]["content"] == expected_pointwise("CAT", True, Q_HOME, False)
    assert messages[2]["content"] == '{"predicted_rating": 4.0}'
    assert messages[3]["content"] == expected_pointwise("BOB", True, Q_BOOK, False)
    assert messages[4]["content"] == '{"predicted_rating": 2.0}'
    assert messages[5]["content"] == expected_pointwise("ANN", True, Q_BOOK, False)


def test_prompts_demonstrations_follow_the_variant():
    demo = Demonstration(query=HOME, users=[CAT, ANN], answer="B")
    messages = render("pairwise", BOOK, [ANN, BOB], variant="cot_no_profile", demonstrations=[demo])
    assert messages[1]["content"] == expected_pairwise("CAT", "ANN", False, Q_HOME, True)
    assert messages[2] == {"role": "assistant", "content": "[User B]"}


def test_prompts_listwise_demonstration_answer_is_best_first_indices():
    demo = Demonstration(query=HOME, users=[CAT, ANN, BOB], answer=[2, 1, 3])
    messages = render("listwise", BOOK, [ANN, BOB], demonstrations=[demo])
    assert messages[1]["content"] == expected_listwise(["CAT", "ANN", "BOB"], True, Q_HOME, False)
    assert messages[2]["content"] == '{"predicted_ranking": [2, 1, 3]}'


@pytest.mark.parametrize(
    ("method", "users", "answer"),
    [
        ("pointwise", [ANN], 6),
        ("pointwise", [ANN], "4"),
        ("pairwise", [ANN, BOB], "[User A]"),
        ("listwise", [ANN, BOB, CAT], [1, 1, 3]),
        ("listwise", [ANN, BOB], [0, 1]),
        ("listwise", [ANN, BOB], [1, 2, 3]),
    ],
)
def test_prompts_demonstration_with_bad_answer_is_rejected(method, users, answer):
    with pytest.raises(ValueError, match=r"demonstrations\[0\]\.answer"):
        render(method, BOOK, users, demonstrations=[Demonstration(query=HOME, users=users, answer=answer)])


def test_prompts_demonstration_must_be_the_dataclass():
    with pytest.raises(TypeError, match="Demonstration"):
        render("pointwise", BOOK, [ANN], demonstrations=[{"query": HOME, "users": [ANN], "answer": 4}])


# ---------------------------------------------------------------- input validation
@pytest.mark.parametrize(
    ("method", "users", "message"),
    [
        ("pairwise", [ANN, BOB, CAT], "exactly 2"),
        ("pairwise", [ANN], "exactly 2"),
        ("pointwise", [ANN, BOB], "exactly 1"),
        ("listwise", [ANN], "2 or more"),
    ],
)
def test_prompts_wrong_number_of_users_is_rejected(method, users, message):
    with pytest.raises(ValueError, match=message):
        render(method, BOOK, users)


@pytest.mark.parametrize("profile", [None, "", "  "])
def test_prompts_profile_variant_without_profile_names_the_fix(profile):
    bare = UserView(ANN.history, 5.0, 3.94, profile)
    with pytest.raises(ValueError, match=r"users\[1\] has no profile.*no_profile"):
        render("pairwise", BOOK, [ANN, bare])


def test_prompts_no_profile_variant_needs_no_profile():
    bare = UserView(ANN.history, 5.0, 3.94)
    assert render("pointwise", BOOK, [bare], variant="no_profile")[1]["content"] == expected_pointwise(
        "ANN", False, Q_BOOK, False
    )


def test_prompts_unknown_method_or_variant_lists_choices():
    with pytest.raises(ValueError, match="pointwise"):
        render("groupwise", BOOK, [ANN])
    with pytest.raises(ValueError, match="cot_no_profile"):
        render("pointwise", BOOK, [ANN], variant="few_shot")


def test_prompts_render_returns_fresh_messages():
    first = render("pointwise", BOOK, [ANN])
    first[0]["content"] = "changed"
    assert render("pointwise", BOOK, [ANN])[0]["content"] == SYSTEM_POINTWISE


# ---------------------------------------------------------------- template files
def template_dir() -> Path:
    return Path(str(resources.files("perrec_eval.tasks.perrecbench") / "templates"))


def test_prompts_template_info_hashes_the_package_files():
    info = prompts.template_info()
    assert set(info) == {"common", "pointwise", "pairwise", "listwise", "profile"}
    for entry in info.values():
        data = (template_dir() / entry["file"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert set(info["listwise"]["variants"]) >= set(prompts.VARIANTS)


@pytest.fixture
def copied(tmp_path: Path) -> Path:
    target = tmp_path / "templates"
    shutil.copytree(template_dir(), target)
    return target


def edit(folder: Path, name: str, old: str, new: str) -> None:
    path = folder / name
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_prompts_copied_templates_load_and_hash_identically(copied):
    loaded = load_templates(copied)
    assert dict(loaded.sha256) == {k: v["sha256"] for k, v in prompts.template_info().items()}


def test_prompts_unknown_placeholder_names_file_and_key(copied):
    edit(copied, "pointwise.yaml", '${query}\\n\\nAnswer:"', '${qeury}\\n\\nAnswer:"')
    with pytest.raises(TemplateError, match=r"pointwise\.yaml.*variants\.default.*'user'.*qeury.*query"):
        load_templates(copied)


def test_prompts_missing_placeholder_names_file_and_key(copied):
    edit(copied, "common.yaml", "${avg_rating}", "3.0")
    with pytest.raises(TemplateError, match=r"common\.yaml.*'profile_part'.*lacks \['avg_rating'\]"):
        load_templates(copied)


def test_prompts_bad_placeholder_syntax_is_rejected(copied):
    edit(copied, "pairwise.yaml", "Act as a personalized", "For $5, act as a personalized")
    with pytest.raises(TemplateError, match=r"pairwise\.yaml.*invalid placeholder syntax"):
        load_templates(copied)


def test_prompts_missing_variant_is_rejected(copied):
    edit(copied, "listwise.yaml", "  cot_no_profile:\n", "  cot_without_profile:\n")
    with pytest.raises(TemplateError, match=r"listwise\.yaml.*missing variants \['cot_no_profile'\]"):
        load_templates(copied)


def test_prompts_profile_flag_must_be_boolean(copied):
    edit(copied, "pairwise.yaml", "    profile: true\n", '    profile: "yes"\n')
    with pytest.raises(TemplateError, match=r"pairwise\.yaml.*'profile' must be true or false"):
        load_templates(copied)


def test_prompts_unknown_key_is_rejected(copied):
    edit(copied, "profile.yaml", "system: null\n", "system: null\ntemperature: 0.1\n")
    with pytest.raises(TemplateError, match=r"profile\.yaml.*unknown keys \['temperature'\]"):
        load_templates(copied)


def test_prompts_missing_file_is_named(copied):
    (copied / "listwise.yaml").unlink()
    with pytest.raises(TemplateError, match=r"listwise\.yaml is missing"):
        load_templates(copied)


def test_prompts_invalid_yaml_is_named(copied):
    (copied / "common.yaml").write_text("author_line: [unclosed\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"common\.yaml is not valid UTF-8 YAML"):
        load_templates(copied)


def test_prompts_non_string_template_is_rejected(copied):
    edit(copied, "listwise.yaml", 'history_entry: "\\n${item}\\n"', "history_entry: 42")
    with pytest.raises(TemplateError, match=r"listwise\.yaml.*'history_entry' must be a string"):
        load_templates(copied)
