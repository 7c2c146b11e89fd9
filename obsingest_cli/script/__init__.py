"""The composition root's library: functions that wire units, kernel and local stack together
for a command (as daf_butler's ``script`` package does for its ``cli/cmd``)."""
