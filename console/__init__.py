"""opsconsole: a console for operators who run SGLang as a systemd service and tune speculative decoding."""

__version__ = "0.1.0"
