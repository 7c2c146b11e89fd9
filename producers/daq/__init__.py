"""DAQ simulator: writes raw CCDs (multi-extension FITS) as the camera writes them, under the
camera's names, deterministically by seed (README.md)."""
