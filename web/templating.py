"""The Jinja environment of the dashboard: attribute syntax on dicts without an exception per lookup.

The pages' data are plain dicts (the JSON API returns exactly them), and the templates read them
as ``cell.size``. Jinja resolves ``a.b`` as ``getattr(a, "b")`` first and only then ``a["b"]``:
on a dict every lookup raises and catches an AttributeError first (~1 µs). A toolchain matrix
of 200 rows × 8 toolchains does ~16,000 of them (~13 ms of a ~30 ms render). Here a dict is
asked for the item first unless the name is one of dict's own methods (``d.items()``), which
is the answer Jinja gives too.
"""
from __future__ import annotations

from flask.templating import Environment

_DICT_METHODS = frozenset(dir(dict))


class DashboardEnvironment(Environment):
    def getattr(self, obj, attribute):
        if type(obj) is dict and attribute not in _DICT_METHODS:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)
