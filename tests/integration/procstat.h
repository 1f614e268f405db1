// CPU time of a process from /proc, for tests and benchmarks that compare
// work done on a shared machine (wall time is noisy there).
#pragma once

#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

// CPU seconds (user + system) process pid has used so far, or 0.
static inline double proc_cpu_seconds(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');  // the fields after the command name
    unsigned long ut = 0, st = 0;
    // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}
