#!/bin/bash
cd /tmp/ci-pch
/usr/bin/time -f "pch2 build wall %e user %U sys %S" -o /tmp/ab-pch2-build.time scripts/build.sh > /tmp/ab-pch2-build.log 2>&1
(cd build && /usr/bin/time -f "pch2 ctest wall %e user %U sys %S" -o /tmp/ab-pch2-ctest.time ctest -j2 --timeout 600 > /tmp/ab-pch2-ctest.log 2>&1)
echo done > /tmp/ab3.done
