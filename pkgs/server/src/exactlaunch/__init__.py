"""Launch the recipe's SGLang server: verbatim argv and env, named variants, serving flags, preflight."""

from exactlaunch.preflight import PreflightFailure, preflight
from exactlaunch.recipe import Recipe, RecipeError, load_recipe

__all__ = ["PreflightFailure", "Recipe", "RecipeError", "load_recipe", "preflight"]
