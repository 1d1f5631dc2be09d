"""Text statistics for the editor dashboard."""


def words(text):
    raise NotImplementedError


def sentences(text):
    raise NotImplementedError


def top_words(text, n, stopwords=()):
    raise NotImplementedError


def average_sentence_length(text):
    raise NotImplementedError
