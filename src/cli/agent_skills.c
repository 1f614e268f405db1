// Agent skills (0.33's agent/skills.go): <root>/<name>/SKILL.md with a
// front matter of "name:" and "description:" lines, found in the roots 0.33
// reads (later roots win), and `/skills import codex|claude|pi`, which copies
// the skill directories of those tools into Ollama's own skills directory
// (staged next to it, then renamed; existing skills are left alone).
#include "cli/agent.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// The value of "key:" in the front matter, or NULL.
static char *front_matter(const char *text, const char *key)
{
    if (strncmp(text, "---", 3) != 0)
        return NULL;
    const char *end = strstr(text + 3, "\n---");
    size_t kl = strlen(key);
    for (const char *p = strchr(text, '\n'); p && (!end || p < end); p = strchr(p + 1, '\n')) {
        if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == ':') {
            const char *v = p + 2 + kl;
            v += strspn(v, " \t\"'");
            size_t n = strcspn(v, "\r\n");
            while (n && (v[n - 1] == '"' || v[n - 1] == '\'' || v[n - 1] == ' '))
                n--;
            return xstrndup(v, n);
        }
    }
    return NULL;
}

static void add_skill(json_t *skills, const char *dirname, const char *path)
{
    struct buf b;
    buf_init(&b, 1 << 20);
    if (fs_read_all(path, 1 << 20, &b, NULL) < 0) {
        buf_deinit(&b);
        return;
    }
    char *name = front_matter(buf_cstr(&b), "name");
    char *desc = front_matter(buf_cstr(&b), "description");
    const char *n = name && *name ? name : dirname;
    size_t i;
    json_t *s;
    json_array_foreach(skills, i, s)
    {
        if (strcmp(json_string_value(json_object_get(s, "name")), n) == 0) {
            json_array_remove(skills, i);
            break;
        }
    }
    json_array_append_new(skills, json_pack("{s:s,s:s,s:s}", "name", n, "description",
                                            desc ? desc : "", "path", path));
    free(name);
    free(desc);
    buf_deinit(&b);
}

static void load_root(json_t *skills, const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char *p = xasprintf("%s/%s/SKILL.md", root, de->d_name);
        if (fs_exists(p))
            add_skill(skills, de->d_name, p);
        free(p);
    }
    closedir(d);
}

void agent_skills_load(struct agent_tools *t)
{
    json_decref(t->skills);
    t->skills = json_array();
    const char *home = getenv("HOME");
    char *roots[5] = {0};
    int n = 0;
    if (home && *home)
        roots[n++] = xasprintf("%s/.agents/skills", home);
    roots[n++] = agent_skills_dir();
    roots[n++] = xasprintf("%s/.agents/skills", t->cwd);
    roots[n++] = xasprintf("%s/.ollama/skills", t->cwd);
    for (int i = 0; i < n; i++) {
        load_root(t->skills, roots[i]);
        free(roots[i]);
    }
}

char *agent_skills_dir(void)
{
    const char *env = getenv("OLLAMA_SKILLS"), *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    if (env && *env)
        return xstrdup(env);
    if (xdg && *xdg)
        return xasprintf("%s/ollama/skills", xdg);
    return xasprintf("%s/.ollama/skills", home ? home : ".");
}

// Copies the tree at src (regular files and directories only) to dst.
static int copy_tree(const char *src, const char *dst, struct err *e)
{
    DIR *d = opendir(src);
    if (!d)
        return err_set(e, ERR_IO, "%s: %s", src, strerror(errno));
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *s = xasprintf("%s/%s", src, de->d_name), *t = xasprintf("%s/%s", dst, de->d_name);
        struct stat st;
        if (lstat(s, &st) != 0 || S_ISLNK(st.st_mode))
            rc = err_set(e, ERR_UNSUPPORTED, "%s: symlinks are not supported", s);
        else if (S_ISDIR(st.st_mode))
            rc = mkdir(t, 0755) == 0 ? copy_tree(s, t, e)
                                     : err_set(e, ERR_IO, "%s: %s", t, strerror(errno));
        else if (S_ISREG(st.st_mode)) {
            struct buf b;
            buf_init(&b, 64u << 20);
            rc = fs_read_all(s, 64u << 20, &b, e);
            if (rc == 0)
                rc = fs_write_atomic(t, b.data ? b.data : "", b.len, e);
            if (rc == 0)
                chmod(t, st.st_mode & 0777);
            buf_deinit(&b);
        }
        free(s);
        free(t);
    }
    closedir(d);
    return rc;
}

// Copies one skill directory into dest/name through a staging directory.
static int import_one(const char *src, const char *dest, const char *name, struct err *e)
{
    char *target = xasprintf("%s/%s", dest, name);
    char *stage = xasprintf("%s/.%s.import-XXXXXX", dest, name);
    int rc = 0;
    if (fs_exists(target))
        rc = err_set(e, ERR_EXISTS, "already exists in %s", dest);
    else if (!mkdtemp(stage))
        rc = err_set(e, ERR_IO, "%s: %s", stage, strerror(errno));
    else if ((rc = copy_tree(src, stage, e)) == 0 && rename(stage, target) != 0)
        rc = err_set(e, ERR_IO, "install %s: %s", target, strerror(errno));
    if (rc < 0 && rc != ERR_EXISTS) {
        char *cmd = xasprintf("rm -rf -- '%s'", stage);
        if (system(cmd) != 0)
            err_prefix(e, "staging directory %s left behind", stage);
        free(cmd);
    }
    free(stage);
    free(target);
    return rc;
}

int agent_skills_import(const char *source, struct buf *out, struct err *e)
{
    static const struct {
        const char *name, *dir;
    } sources[] = {
        {"codex", ".codex/skills"}, {"claude", ".claude/skills"}, {"pi", ".pi/agent/skills"}};
    const char *rel = NULL, *home = getenv("HOME");
    for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
        if (source && strcmp(source, sources[i].name) == 0)
            rel = sources[i].dir;
    if (!rel)
        return err_set(e, ERR_INVALID, "unknown skill source \"%s\"", source ? source : "");
    char *src = xasprintf("%s/%s", home ? home : ".", rel), *dest = agent_skills_dir();
    int n = 0, rc = fs_mkdir_p(dest, e);
    DIR *d = rc == 0 ? opendir(src) : NULL;
    if (rc == 0 && !d)
        buf_printf(out, "No skills in %s\n", src);
    for (struct dirent *de; d && (de = readdir(d));) {
        char *dir = xasprintf("%s/%s", src, de->d_name), *md = xasprintf("%s/SKILL.md", dir);
        struct stat st;
        if (de->d_name[0] != '.' && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && fs_exists(md)) {
            struct err one = {0};
            if (import_one(dir, dest, de->d_name, &one) == 0)
                buf_printf(out, "Imported %s\n", de->d_name), n++;
            else
                buf_printf(out, "Skipped %s: %s\n", de->d_name, one.msg);
        }
        free(md);
        free(dir);
    }
    if (d)
        closedir(d);
    free(src);
    free(dest);
    return rc < 0 ? rc : n;
}
