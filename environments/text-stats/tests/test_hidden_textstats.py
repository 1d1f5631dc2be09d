import pytest
from textstats import average_sentence_length, sentences, top_words, words


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", []),
        ("   \n\t ", []),
        ("Hello, World!", ["hello", "world"]),
        ("Don't stop", ["don't", "stop"]),
        ("rock'n'roll forever", ["rock'n'roll", "forever"]),
        ("'quoted' words", ["quoted", "words"]),
        ("it\u2019s fine", ["it\u2019s", "fine"]),
        ("e-mail me", ["e", "mail", "me"]),
        ("The 42nd street, 2024", ["the", "42nd", "street", "2024"]),
        ("Caf\u00e9 STRA\u00dfE", ["caf\u00e9", "stra\u00dfe"]),
        ("dogs' bowls", ["dogs", "bowls"]),
        ("a''b", ["a", "b"]),
        ("x_y z", ["x", "y", "z"]),
    ],
)
def test_words(text, expected):
    assert words(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", []),
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        ("No terminator at the end", ["No terminator at the end"]),
        ("First.  Second without end", ["First.", "Second without end"]),
        ("Wait...   what?!  Really", ["Wait...", "what?!", "Really"]),
        ("Pi is 3.14 today. Yes.", ["Pi is 3.14 today.", "Yes."]),
        ("Dr. Who arrived.", ["Dr.", "Who arrived."]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("(It was late.) We slept.", ["(It was late.)", "We slept."]),
        ("Line one\nstill one. Line\n\ttwo.", ["Line one still one.", "Line two."]),
        ("Ends with quote.\u201d Next", ["Ends with quote.\u201d", "Next"]),
    ],
)
def test_sentences(text, expected):
    assert sentences(text) == expected


TEXT = (
    "The cat sat on the mat. The dog sat on the log! "
    "A cat and a dog? Yes: the cat, the dog and the mat."
)


def test_top_words_basic():
    assert top_words(TEXT, 3) == [("the", 7), ("cat", 3), ("dog", 3)]


def test_top_words_stopwords_case_insensitive():
    assert top_words(TEXT, 4, stopwords={"The", "A", "AND", "on"}) == [
        ("cat", 3),
        ("dog", 3),
        ("mat", 2),
        ("sat", 2),
    ]


def test_top_words_fewer_than_n():
    assert top_words("b a b", 10) == [("b", 2), ("a", 1)]


def test_top_words_empty():
    assert top_words("", 5) == []
    assert top_words("the the", 5, stopwords=["the"]) == []


def test_top_words_returns_tuples():
    result = top_words("x y x", 1)
    assert result == [("x", 2)] and isinstance(result[0], tuple)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0.0),
        ("One two three.", 3.0),
        ("One two. Three four five six!", 3.0),
        ("A b c. D e. F", 2.0),
        ("Hi. How are you today? Fine", 2.0),
        ("It's rock'n'roll. Yes it is. Really", 2.0),
        ("One. Two words. And three words.", 2.0),
        ("A. B c. D e f.", 2.0),
        ("A. B c.", 1.5),
        ("A. B. C d e f g.", 2.33),
        ("A b. C d. E.", 1.67),
    ],
)
def test_average_sentence_length(text, expected):
    assert average_sentence_length(text) == expected
