"""SIGINT and SIGTERM as a request to stop, for the duration of a consumer's run."""

import asyncio
import signal
import threading
from contextlib import contextmanager

#: The signals that ask a consumer to finish its in-flight work and return.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_on_signals(stop, loop: asyncio.AbstractEventLoop | None = None):
    """Inside, the first SIGINT or SIGTERM calls stop() and gives the signals back their
    previous handlers, so that a second one acts as it did before (Ctrl-C twice interrupts).
    Outside the main thread nothing is installed: Python delivers signals there only.
    With a loop, the handlers go through it, so that they wake it at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    restored = False

    def restore() -> None:
        """Put the previous handlers back, once."""
        nonlocal restored
        if restored:
            return
        restored = True
        for sig, handler in previous.items():
            if loop is not None:
                loop.remove_signal_handler(sig)
            # None: a handler not installed from Python; the default is the closest match.
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def on_signal(*_) -> None:
        """Stop, and let the next signal act as before."""
        restore()
        stop()

    for sig in STOP_SIGNALS:
        if loop is not None:
            loop.add_signal_handler(sig, on_signal)
        else:
            signal.signal(sig, on_signal)
    try:
        yield
    finally:
        restore()
