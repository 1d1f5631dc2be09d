"""Region codes. The shop's export is inconsistent: staff type the shipping region by hand,
so the same country shows up as ``DE``, ``de``, ``Deu`` or ``GER``. Everything downstream
works with ISO 3166 alpha-2 codes (``DE``, ``GB``, ...)."""

# Common non-ISO spellings, mapped to ISO alpha-2.
ALIASES = {
    "UK": "GB",
    "GBR": "GB",
    "GER": "DE",
    "DEU": "DE",
    "FRA": "FR",
    "NLD": "NL",
    "AUT": "AT",
    "CHE": "CH",
    "USA": "US",
}


def canonical_region(code):
    """The ISO alpha-2 code for a region as written in the export: surrounding whitespace
    and letter case are ignored, and the aliases above are accepted (``" uk"`` -> ``"GB"``,
    ``"Deu"`` -> ``"DE"``). Codes that are not aliases come back upper-cased."""
    code = code.strip()
    return ALIASES.get(code, code).upper()
