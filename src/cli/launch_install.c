// The offer to install a missing tool, as 0.33's ensure<Tool>Installed
// functions make it: the programs the installer needs are checked first,
// then the question ("Cline is not installed. Install with npm?"), answered
// by --yes, asked on a terminal, and an error pointing at --yes anywhere
// else; then the install command runs attached to the terminal.
#include "cli/launch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *launch_which(const char *program)
{
    const char *path = getenv("PATH");
    char *copy = xstrdup(path ? path : "");
    char *found = NULL;
    for (char *dir = copy, *next; dir && !found; dir = next) {
        next = strchr(dir, ':');
        if (next)
            *next++ = '\0';
        char *cand = xasprintf("%s/%s", *dir ? dir : ".", program);
        struct stat st;
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            found = cand;
        else
            free(cand);
    }
    free(copy);
    return found;
}

static bool on_path(const char *program)
{
    char *p = launch_which(program);
    bool found = p != NULL;
    free(p);
    return found;
}

int launch_ask(const char *question, bool yes, bool default_yes)
{
    if (yes)
        return 1;
    if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO)) {
        cli_fail("%s requires confirmation; re-run with --yes to continue", question);
        return -1;
    }
    fprintf(stderr, "%s %s ", question, default_yes ? "[Y/n]" : "[y/N]");
    char line[64];
    if (!fgets(line, sizeof(line), stdin))
        return 0;
    if (line[0] == 'y' || line[0] == 'Y')
        return 1;
    if (line[0] == 'n' || line[0] == 'N')
        return 0;
    return default_yes && (line[0] == '\n' || line[0] == '\r');
}

// The "required dependencies are missing" error when a program the
// installer runs is not on PATH; 0 when all are there.
static int check_needs(const char *name, const struct launch_install *in)
{
    char missing[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < 3 && in->needs[i].program; i++) {
        if (on_path(in->needs[i].program))
            continue;
        n += (size_t)snprintf(missing + n, sizeof(missing) - n, "%s%s", n ? "\n  " : "",
                              in->needs[i].label);
        if (n >= sizeof(missing))
            n = sizeof(missing) - 1;
    }
    if (n == 0)
        return 0;
    if (in->needs_error)
        return cli_fail("%s", in->needs_error);
    return cli_fail("%s is not installed and required dependencies are missing\n\nInstall the "
                    "following first:\n  %s\n\nThen re-run:\n  ollama launch %s",
                    in->subject, missing, name);
}

int launch_run_attached(const char *const *argv)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

// The install command for the user to run: a `bash -c SCRIPT` as its script.
static void print_by_hand(const struct launch_install *in)
{
    const char *const *argv = in->argv;
    fprintf(stderr, "To install it yourself, run:\n  ");
    if (strcmp(argv[0], "bash") == 0 && argv[1] && argv[1][0] == '-' && argv[2])
        fprintf(stderr, "%s", argv[2]);
    else
        for (size_t i = 0; argv[i]; i++)
            fprintf(stderr, "%s%s", i ? " " : "", argv[i]);
    fprintf(stderr, "\n");
}

int launch_install(const char *name, const struct launch_install *in, bool yes)
{
    if (check_needs(name, in) != 0)
        return 1;
    int ok = launch_ask(in->question, yes, true);
    if (ok == 0)
        cli_fail("%s installation cancelled", in->key);
    if (ok <= 0) {
        print_by_hand(in);
        return 1;
    }
    fprintf(stderr, "\nInstalling %s...\n", in->display);
    int status = launch_run_attached(in->argv);
    if (status < 0)
        return cli_fail("failed to install %s: %s", in->key, strerror(errno));
    if (status != 0 && in->npx && on_path("npx"))
        return 2;
    if (status != 0)
        return cli_fail("failed to install %s: exit status %d", in->key, status);
    return 0;
}
