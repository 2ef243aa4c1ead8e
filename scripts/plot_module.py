"""scripts/plot as a module, for the plot scripts beside it (its
import_pyplot(), the one matplotlib loader, and title_of()). scripts/plot has
no .py suffix, so it is loaded from its path; a script's own folder is on
sys.path, so the scripts here import this module by name."""
import importlib.machinery
import importlib.util
import os


def load():
    """scripts/plot, loaded as a module."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot")
    loader = importlib.machinery.SourceFileLoader("tally_plot", path)
    spec = importlib.util.spec_from_loader("tally_plot", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
