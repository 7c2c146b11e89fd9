"""``make soak``: a night of LSSTCam exposures through the whole pipeline, as processes, with a
register-function instance SIGKILLed inside exposure bursts (``tests.soak.harness``)."""
