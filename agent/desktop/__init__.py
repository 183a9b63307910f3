"""One desktop core for computer use and the native adapter: displays, capture, input, windows.

    xvfb.XvfbDisplay        a private Xvfb server (tests, benches, simulator)
    capture.ScreenCapture   monitors() and grab() -> Frame (BGRA), via mss/XShm
    encode                  to_png / to_jpeg / to_nv12 / scale_to
    input.InputDriver       XTEST mouse and keyboard, any Unicode text, release_all()
    windows.WindowInspector list / describe / focus top-level windows
    apps                    AppCatalog (.desktop files + configured) and launch()
    clipboard.ClipboardOwner  own and serve the CLIPBOARD selection
    session.DesktopSession  all of the above for one display, opened lazily
    errors                  DesktopError and its typed subclasses

Only input, keys, keyboard_map, windows and clipboard import python-xlib at
import time; capture and encode import mss, Pillow and PyAV on first use. So
this package, errors, xvfb, session and apps - and agent/computer_use/service.py -
import fine on a host without the desktop extra (probe() then says None).
"""
