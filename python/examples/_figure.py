"""What the example scripts share: matplotlib is optional, so a figure is drawn only where it is installed."""


def draw_if_possible(plot, data, output):
    """Calls ``plot(data, output)`` and says so, or says that matplotlib is missing; returns 0 (the
    script's exit status) either way."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed, so no figure was drawn (pip install matplotlib to draw it)")
        return 0
    plot(data, output)
    print(f"wrote {output}")
    return 0
