"""One desktop core for computer use and the native adapter: displays, capture, input, windows."""
