"""The Textual console: `opsconsole connect TARGET...` and `opsconsole demo`.

The only package that imports textual. It renders what console.core hands it (HostView from
console.core.status.monitor, the operations' typed events) and sends intents; it holds no logic of its own.

    app.py        the App: bindings (with ids, remappable), the command palette, one tab per host + overview
    app.tcss      styles
    config.py     <workspace>/console.toml: refresh interval, key remaps, theme, colour thresholds
    messages.py   messages from the host workers to the widgets
    screens/      help
    widgets/      host header, GPU table, server panel, journal, overview, sparklines
"""
