"""The file reader and schema check shared by bitexact, the launcher (exactlaunch) and pinlock, so that
the three programs refuse the same file for the same reason with the same words, and the one recipe reader
(exactformats.recipe) that gives the three the same recipe, of the same schemas (RECIPE_SCHEMAS)."""

from exactformats import recipe, strictjson
from exactformats.environ import cache_home, cache_home_note
from exactformats.files import BOM, FormatError, decode, read_bytes, read_text, shown, special_kind
from exactformats.recipe import Recipe, RecipeError, Variant, Weights, read_recipe
from exactformats.schema import RECIPE_SCHEMAS, check_schema, schema_problem

__all__ = [
    "BOM",
    "FormatError",
    "RECIPE_SCHEMAS",
    "Recipe",
    "RecipeError",
    "Variant",
    "Weights",
    "cache_home",
    "cache_home_note",
    "check_schema",
    "decode",
    "read_bytes",
    "read_recipe",
    "recipe",
    "read_text",
    "schema_problem",
    "shown",
    "special_kind",
    "strictjson",
]
