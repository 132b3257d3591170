"""One module per page; each has its HTML route, its JSON twin under /api/ and the function that
assembles the page's data from the store (the JSON API returns exactly that data)."""
from web.pages import actions, assets, bot, commit, function, index, matrix, series, sizemap

PAGES = [index.bp, series.bp, commit.bp, function.bp, matrix.bp, actions.bp, assets.bp, bot.bp, sizemap.bp]
