"""thrum: a Git-native message bus for teams of AI coding agents."""

__version__ = "0.1.0"
