// gears/: gear specs, merge, matching and padding analysis (see gears/gears.h).
