#!/bin/bash
set -euo pipefail
gnuplot <<'GP'
set terminal png size 1000,600 background '#ffffff'
set output 'chart.png'
set datafile separator ','
set xdata time
set timefmt '%Y-%m-%d'
set format x '%b'
set xlabel 'Date (2023)'
set ylabel 'Temperature (°C)'
set title 'Temperature every other day, 2023'
set key top left
set xrange ['2023-01-01':'2023-12-31']
set grid
plot "< grep ',Oslo,' temperatures.csv" using 1:3 with lines linewidth 2 linecolor rgb '#0000ff' title 'Oslo', \
     "< grep ',Madrid,' temperatures.csv" using 1:3 with lines linewidth 2 linecolor rgb '#00a000' title 'Madrid', \
     "< grep ',Cairo,' temperatures.csv" using 1:3 with lines linewidth 2 linecolor rgb '#ff0000' title 'Cairo'
GP
ls -l chart.png
