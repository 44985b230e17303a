"""The board: TensorBoard's controls inside the notebook, with ipywidgets, no server (``msnb.board``, ``%mfmon_board``).

``model`` holds the runs in memory (read once, followed for new bytes,
judged), ``render`` draws a :class:`View` of them with matplotlib, and
``widgets`` is the ipywidgets shell that turns controls into views.  The top
layer: it uses the readers, the judge and the plots; only the magics and
``msnb.board`` import it.  Named ``dashboard`` because ``msnb.board`` is the function
(importing a ``msnb.board`` package would put the module in its place).
"""

from .model import BoardData, RunData
from .render import View, render
from .widgets import Board, board

__all__ = ["Board", "BoardData", "RunData", "View", "board", "render"]
