"""The progress bar of bulk work (export, load): for a person at a terminal, never in a pipe."""

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported by bar(): a tenth of a CPU second that the commands without a bar need not pay.
    from tqdm import tqdm


def wanted(data_on_stdout: bool) -> bool:
    """True when a bar helps: stdout and stderr are terminals and stdout does not carry the data.

    A redirected or piped stdout or stderr means a script or a file is reading: the bar's
    carriage returns would only litter it. Records written to a terminal show progress already,
    and a bar drawn between them would break them up.
    """
    return not data_on_stdout and sys.stdout.isatty() and sys.stderr.isatty()


def bar(total: int | None, desc: str, show: bool) -> "tqdm":
    """A bar on stderr counting messages, with rate and ETA (ETA only when total is known)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="msg", dynamic_ncols=True,
                file=sys.stderr, disable=not show)
