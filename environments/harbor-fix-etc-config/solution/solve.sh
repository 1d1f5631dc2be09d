#!/bin/bash
# the port is out of range, and the storage folder is missing
sed -i 's/^port = 80800$/port = 8080/' /etc/reportd/reportd.conf
mkdir -p /var/lib/reportd/reports
/app/check-config
