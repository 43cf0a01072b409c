#!/usr/bin/env python3
"""The series manifest (hw-cxl/series.manifest) and the steps it describes.

Used by scripts/export-series.sh; not meant to be run by hand.

    series.py check TOP                 validate the manifest against the
                                        project's files; print the steps
    series.py plan TOP                  one line per step: its number and its
                                        patches/ file (or -)
    series.py stages TOP                one line per stage: its name, the
                                        number of its last step and its title
    series.py base TOP                  the patches/ files the series is based
                                        on (upstream has them), one a line
    series.py apply TOP N TREE MSGFILE AUTHOR [ADDED...]
                                        step N (1-based): change TREE (a QEMU
                                        tree with the steps before N applied
                                        and step N's patch, if any, already
                                        applied; ADDED: the files that patch
                                        adds), write the commit message
                                        (empty: keep the patch's own)
    series.py cover TOP                 the cover letter's subject line, then
                                        its text
"""
import fnmatch
import os
import re
import sys

MANIFEST = 'hw-cxl/series.manifest'


class ManifestError(Exception):
    pass


class Step:
    def __init__(self, subject, line):
        self.subject = subject
        self.line = line
        self.body = []
        self.patch_glob = None
        self.patch = None
        self.files = []     # (src, dest)
        self.maintainers_in = None
        self.qtest_timeout = None
        self.stubs = []     # (src, dest)
        self.stage = None


def parse(top):
    path = os.path.join(top, MANIFEST)
    m = {'steps': [], 'drop': [], 'skip': {}, 'meson': None, 'base': [],
         'kconfig': None, 'trace': None, 'maintainers': None, 'cover': None,
         'stages': []}
    step = None
    stage = None
    with open(path) as f:
        for no, raw in enumerate(f, 1):
            line = raw.rstrip('\n')
            where = '%s:%d' % (MANIFEST, no)
            if line.startswith('|'):
                if step is None:
                    raise ManifestError('%s: message text outside a step' % where)
                step.body.append(line[2:] if line.startswith('| ') else line[1:])
                continue
            line = line.split('#', 1)[0].strip() if not line.startswith('step') else line.strip()
            if not line:
                continue
            word, _, rest = line.partition(' ')
            rest = rest.strip()
            args = rest.split()
            if word == 'step':
                step = Step(rest, where)
                step.stage = stage
                m['steps'].append(step)
            elif word == 'stage':
                if len(args) < 2 or any(args[0] == s[0] for s in m['stages']):
                    raise ManifestError('%s: stage NAME TITLE, each NAME once' % where)
                stage = args[0]
                step = None
                m['stages'].append((stage, rest.partition(' ')[2].strip(), where))
            elif word == 'stub':
                if step is None or len(args) != 2:
                    raise ManifestError('%s: stub SRC DEST, inside a step' % where)
                step.stubs.append((args[0], args[1]))
            elif word == 'base':
                m['base'].append(rest)
            elif word == 'patch':
                if step is None or step.patch_glob:
                    raise ManifestError('%s: a patch line belongs to a step, one per step' % where)
                step.patch_glob = rest
            elif word == 'file':
                if step is None or len(args) != 2:
                    raise ManifestError('%s: file SRC DEST, inside a step' % where)
                step.files.append((args[0], args[1]))
            elif word == 'maintainers-in':
                if step is None:
                    raise ManifestError('%s: maintainers-in belongs to a step' % where)
                step.maintainers_in = rest
            elif word == 'qtest-timeout':
                if step is None or not rest.isdigit():
                    raise ManifestError('%s: qtest-timeout SECONDS, inside a step' % where)
                step.qtest_timeout = int(rest)
            elif word == 'drop':
                m['drop'].append(rest)
            elif word == 'skip':
                m['skip'][args[0]] = ' '.join(args[1:])
            elif word in ('meson', 'kconfig', 'trace-events'):
                if len(args) != 2:
                    raise ManifestError('%s: %s SRC DEST' % (where, word))
                m['trace' if word == 'trace-events' else word] = tuple(args)
            elif word == 'maintainers':
                m['maintainers'] = rest
            elif word == 'cover':
                m['cover'] = rest
            else:
                raise ManifestError('%s: unknown line "%s"' % (where, word))
    return m


def patch_key(name):
    """A patch's name without its NNNN- number and .patch suffix."""
    return re.sub(r'\.patch$', '', re.sub(r'^\d+-', '', name))


def check(top):
    """Validate the manifest; raise ManifestError naming every problem."""
    m = parse(top)
    errors = []
    # every patches/*.patch in exactly one step or drop line
    patches = sorted(p for p in os.listdir(os.path.join(top, 'patches')) if p.endswith('.patch'))
    globs = ([(s.patch_glob, s) for s in m['steps'] if s.patch_glob] +
             [(g, None) for g in m['drop']] + [(g, 'base') for g in m['base']])
    m['base_patches'] = []
    for p in patches:
        hits = [(g, s) for g, s in globs if fnmatch.fnmatch(patch_key(p), g)]
        if not hits:
            errors.append('patches/%s is in no step of %s: add a "patch" line to the step '
                          'it belongs in (or "drop" it if it is project glue)' % (p, MANIFEST))
        elif len(hits) > 1:
            errors.append('patches/%s matches %d lines of %s (%s): make them match one'
                          % (p, len(hits), MANIFEST, ', '.join(g for g, _ in hits)))
        elif hits[0][1] == 'base':
            m['base_patches'].append(p)
        elif hits[0][1] is not None:
            s = hits[0][1]
            s.patch = p
    for g, s in globs:
        if not any(fnmatch.fnmatch(patch_key(p), g) for p in patches):
            errors.append('%s: "%s" matches no file in patches/ (renamed or split? update it)'
                          % (s.line if isinstance(s, Step) else MANIFEST, g))
    # every file of hw-cxl/ named once
    named = {}
    for s in m['steps']:
        for src, dest in s.files + s.stubs:
            named.setdefault(src, []).append(s.line)
    for key in ('meson', 'kconfig', 'trace'):
        if m[key]:
            named.setdefault(m[key][0], []).append(MANIFEST)
    for src in m['skip']:
        named.setdefault(src, []).append(MANIFEST)
    for f in sorted(os.listdir(os.path.join(top, 'hw-cxl'))):
        rel = 'hw-cxl/' + f
        if rel not in named:
            errors.append('%s is in no patch of the series: add a "file %s DEST" line to the '
                          'step of %s whose code it carries (or "skip" it)' % (rel, rel, MANIFEST))
        elif len(named[rel]) > 1:
            errors.append('%s is named %d times in %s' % (rel, len(named[rel]), MANIFEST))
    for rel in named:
        if not os.path.lexists(os.path.join(top, rel)):
            errors.append('%s names %s, which does not exist (renamed or split? update it)'
                          % (MANIFEST, rel))
    if m['stages'] and m['steps'] and m['steps'][0].stage is None:
        errors.append('%s: the steps before the first stage line belong to no stage'
                      % m['steps'][0].line)
    for name, _, where in m['stages']:
        if not any(s.stage == name for s in m['steps']):
            errors.append('%s: stage %s has no step' % (where, name))
    if not errors:
        try:
            stub_steps(top, m)
        except ManifestError as e:
            errors.append(str(e))
    for s in m['steps']:
        if not s.subject and not s.patch_glob:
            errors.append('%s: a step needs a subject or a patch' % s.line)
        if not s.patch_glob and not s.body:
            errors.append('%s: step "%s" has no message ("| text" lines)' % (s.line, s.subject))
    # every source the project builds is exported
    if m['meson']:
        t, f = meson_lists(top, m['meson'][0])
        exported = {src for s in m['steps'] for src, _ in s.files}
        for src in t + f:
            if src not in exported:
                errors.append('%s builds %s, which no step of %s exports'
                              % (m['meson'][0], src, MANIFEST))
    if errors:
        raise ManifestError('\n'.join(errors))
    return m


def meson_lists(top, meson):
    """The if_true and if_false source lists of the project's meson.build."""
    text = open(os.path.join(top, meson)).read()
    d = os.path.dirname(meson)
    out = []
    for kind in ('if_true', 'if_false'):
        files = []
        for mo in re.finditer(kind + r'\s*:\s*files\(([^)]*)\)', text):
            files += [d + '/' + x for x in re.findall(r"'([^']+)'", mo.group(1))]
        out.append(files)
    if not out[0]:
        raise ManifestError('%s: no "if_true: files(...)" list found' % meson)
    return out


def kconfig_symbol(top, m):
    text = open(os.path.join(top, m['kconfig'][0])).read()
    mo = re.search(r'^config\s+(\w+)', text, re.M)
    if not mo:
        raise ManifestError('%s declares no config symbol' % m['kconfig'][0])
    return mo.group(1)


def defined_functions(path):
    text = open(path).read()
    return set(re.findall(r'^[A-Za-z][\w \*]*?\b(\w+)\(', text, re.M)) - {'if', 'while', 'for'}


def defined_symbols(path):
    """What a C file defines for other files: its non-static functions and
    variables (a definition starts its line)"""
    text = open(path).read()
    funcs = re.findall(r'^(?!static\b)[A-Za-z][\w \*]*?\b(\w+)\([^;]*?\)\s*\n\{', text, re.M)
    data = re.findall(r'^(?!static\b|extern\b)(?:const )?\w+ \**(\w+)(?:\[\w*\])? =', text, re.M)
    return set(funcs) | set(data)


def stub_steps(top, m):
    """{stub src: (first step, 0-based, step that replaces it)}: a stub is
    exported with its step and removed in the step whose exported files
    define everything it stubs (all of it at once)"""
    out = {}
    steps = m['steps']
    for i, s in enumerate(steps):
        for src, dest in s.stubs:
            want = defined_symbols(os.path.join(top, src))
            if not want:
                raise ManifestError('%s: stub %s defines nothing' % (s.line, src))
            have = set()
            for j in range(i, len(steps)):
                for fsrc, _ in steps[j].files:
                    if fsrc.endswith('.c'):
                        have |= defined_symbols(os.path.join(top, fsrc)) & want
                if have == want:
                    out[src] = (i, j, dest)
                    break
                if have and j > i:
                    raise ManifestError('%s: stub %s: step %s defines only %s of what it '
                                        'stubs (%s): one step must replace all of it'
                                        % (s.line, src, steps[j].line, ', '.join(sorted(have)),
                                           ', '.join(sorted(want))))
                if have:
                    raise ManifestError('%s: stub %s: its own step defines %s'
                                        % (s.line, src, ', '.join(sorted(have))))
            else:
                raise ManifestError('%s: stub %s is never replaced: no later step exports '
                                    '%s' % (s.line, src, ', '.join(sorted(want - have))))
    return out


def active_stubs(top, m, n):
    """The stubs in the tree after step n (1-based): src -> dest"""
    return {src: dest for src, (i, j, dest) in stub_steps(top, m).items() if i < n <= j}


# ---------------------------------------------------------------- edits


def rewrite_includes(text, headers):
    """#include of a header exported under include/: use its include path."""
    def sub(mo):
        name = os.path.basename(mo.group(1))
        if name in headers:
            return '#include "%s"' % headers[name]
        return mo.group(0)
    text = re.sub(r'^#include "([^"]+)"', sub, text, flags=re.M)
    # a comment that explained the project's relative include goes with it
    text = re.sub(r'^/\*[^\n]*hw-cxl[^\n]*\*/\n(?=#include ")', '', text, flags=re.M)
    return text


def exported_headers(m):
    h = {}
    for s in m['steps']:
        for src, dest in s.files:
            if dest.startswith('include/'):
                h[os.path.basename(dest)] = dest[len('include/'):]
    return h


def meson_block(top, m, done_srcs, stubs=()):
    src_meson, _ = m['meson']
    sym = kconfig_symbol(top, m)
    t, f = meson_lists(top, src_meson)
    dest_of = {src: dest for s in m['steps'] for src, dest in s.files}
    built = [os.path.basename(dest_of[x]) for x in t if x in done_srcs]
    built += sorted(os.path.basename(d) for d in stubs)
    impl = set()
    for x in t:
        if x in done_srcs:
            impl |= defined_functions(os.path.join(top, x))
    stubs_cond, stubs_always = [], []
    for x in f:
        if x not in done_srcs:
            continue
        name = os.path.basename(dest_of[x])
        (stubs_cond if defined_functions(os.path.join(top, x)) & impl else stubs_always).append(name)
    lines = []
    if built or stubs_cond:
        lines.append("system_ss.add(when: 'CONFIG_%s'," % sym)
        if built:
            lines.append('               if_true: files(')
            lines += ["                   '%s'," % b for b in built]
            lines.append('               )%s' % (',' if stubs_cond else ')'))
        if stubs_cond:
            lines.append('               if_false: files(')
            lines += ["                   '%s'," % b for b in stubs_cond]
            lines.append('               ))')
    for b in stubs_always:
        lines.append("system_ss.add(files('%s'))" % b)
    return lines


def apply_meson(tree, top, m, done_srcs, first, stubs=()):
    dest = os.path.join(tree, m['meson'][1])
    text = open(dest).read()
    mark = '\n# cxl-shm\n'
    base = text.split(mark)[0] if mark in text else text.rstrip('\n') + '\n'
    block = meson_block(top, m, done_srcs, stubs)
    new = base + (mark + '\n'.join(block) + '\n' if block else '')
    if new != text:
        open(dest, 'w').write(new)


def apply_kconfig(tree, top, m, done_srcs, prev_srcs):
    t, _ = meson_lists(top, m['meson'][0])
    if any(x in done_srcs for x in t) and not any(x in prev_srcs for x in t):
        dest = os.path.join(tree, m['kconfig'][1])
        text = open(dest).read().rstrip('\n') + '\n\n'
        text += open(os.path.join(top, m['kconfig'][0])).read().rstrip('\n') + '\n'
        open(dest, 'w').write(text)


def trace_events(top, m):
    """[(section, event name, line)] of the project's trace-events."""
    out, section = [], None
    for line in open(os.path.join(top, m['trace'][0])):
        line = line.rstrip('\n')
        mo = re.match(r'#\s*(\S+\.c)\s*$', line)
        if mo:
            section = mo.group(1)
            continue
        mo = re.match(r'(\w+)\(', line)
        if mo:
            out.append((section, mo.group(1), line))
    return out


def event_users(top, m):
    """Event name -> (step index, 0-based; the project file it is listed under)."""
    src_step = {}
    for i, s in enumerate(m['steps']):
        for src, _ in s.files:
            src_step[src] = i
    c_files = [src for src in src_step if src.endswith('.c')]
    texts = {src: open(os.path.join(top, src)).read() for src in c_files}
    out = {}
    for section, name, _ in trace_events(top, m):
        users = [src for src in c_files if re.search(r'\btrace_%s\(' % name, texts[src])]
        named = os.path.dirname(m['trace'][0]) + '/' + (section or '')
        if users:
            first = min(users, key=lambda src: (src_step[src], src != named))
            out[name] = (src_step[first], first)
        elif named in src_step:
            out[name] = (src_step[named], named)
        elif named in m['skip']:
            continue            # a project-only file's events stay out
        else:
            raise ManifestError('trace event %s (%s) is used by no exported source and its '
                                'section names none' % (name, m['trace'][0]))
    return out


def apply_trace(tree, top, m, n):
    users = event_users(top, m)
    dest_of = {src: dest for s in m['steps'] for src, dest in s.files}
    groups = {}
    for sec, name, line in trace_events(top, m):
        if name not in users:
            continue
        step, src = users[name]
        if step == n:
            groups.setdefault(src, []).append(line)
    if not groups:
        return
    dest = os.path.join(tree, m['trace'][1])
    text = open(dest).read().rstrip('\n') + '\n'
    for src, lines in groups.items():
        text += '\n# %s\n' % os.path.basename(dest_of[src]) + '\n'.join(lines) + '\n'
    open(dest, 'w').write(text)


def apply_maintainers(tree, m, new_files, author, gone=()):
    if not new_files and not gone:
        return
    path = os.path.join(tree, 'MAINTAINERS')
    text = open(path).read()
    title = m['maintainers']
    if '\n' + title + '\n' not in text:
        anchor = '\nCompute Express Link\n'
        i = text.index(anchor) + 1
        j = text.index('\n\n', i) + 2
        text = text[:j] + '%s\nM: %s\nS: Maintained\n\n' % (title, author) + text[j:]
    i = text.index('\n' + title + '\n') + 1
    j = text.index('\n\n', i) + 1
    sec = text[i:j].rstrip('\n').split('\n')
    head = [x for x in sec if not x.startswith('F:')]
    fs = sorted(set([x for x in sec if x.startswith('F:')] + ['F: ' + f for f in new_files])
                - {'F: ' + f for f in gone})
    text = text[:i] + '\n'.join(head + fs) + '\n' + text[j:]
    open(path, 'w').write(text)


def add_to_section(tree, title, files):
    """F: lines for FILES at the end of MAINTAINERS section TITLE's F: lines."""
    path = os.path.join(tree, 'MAINTAINERS')
    text = open(path).read()
    if '\n' + title + '\n' not in text:
        raise ManifestError('MAINTAINERS has no section "%s"' % title)
    i = text.index('\n' + title + '\n') + 1
    j = text.index('\n\n', i) + 1
    sec = text[i:j].rstrip('\n').split('\n')
    last = max(k for k, x in enumerate(sec) if x.startswith('F:'))
    sec[last + 1:last + 1] = ['F: ' + f for f in files if 'F: ' + f not in sec]
    open(path, 'w').write(text[:i] + '\n'.join(sec) + '\n' + text[j:])


def apply_qtest(tree, top, m, dest, timeout):
    name = os.path.basename(dest)[:-2]
    path = os.path.join(tree, 'tests/qtest/meson.build')
    text = open(path).read()
    if timeout:
        # meson's default for a qtest is 60 s
        old = 'slow_qtests = {\n'
        if old not in text:
            raise ManifestError('tests/qtest/meson.build: no slow_qtests to give %s its timeout' % name)
        i = text.index(old) + len(old)
        while text[i:].startswith("  '") and text[i + 3:].split("'")[0] < name:
            i = text.index('\n', i) + 1
        text = text[:i] + "  '%s' : %d,\n" % (name, timeout) + text[i:]
    sym = kconfig_symbol(top, m)
    old = "(config_all_devices.has_key('CONFIG_CXL') ? ['cxl-test'] : [])\n"
    if old not in text:
        raise ManifestError('tests/qtest/meson.build: no qtests_cxl list to add %s to' % name)
    # continue the list with a backslash where its neighbours put theirs
    width = len(next(x for x in text.split('\n') if "['display-vga-test']" in x)) - 1
    text = text.replace(old, (old.rstrip('\n') + ' +').ljust(width) + '\\\n'
                        "  (config_all_devices.has_key('CONFIG_%s') ? ['%s'] : [])\n"
                        % (sym, name), 1)
    open(path, 'w').write(text)


def apply_docs_index(tree, dest):
    path = os.path.join(tree, 'docs/system/device-emulation.rst')
    text = open(path).read()
    entry = dest[len('docs/system/'):]
    old = '   devices/cxl.rst\n'
    if old not in text:
        raise ManifestError('docs/system/device-emulation.rst has no devices/cxl.rst entry')
    text = text.replace(old, old + '   %s\n' % entry, 1)
    open(path, 'w').write(text)


def apply(top, n, tree, msgfile, author, patch_added=()):
    m = check(top)
    steps = m['steps']
    s = steps[n - 1]
    prev = {src for st in steps[:n - 1] for src, _ in st.files}
    done = prev | {src for src, _ in s.files}
    headers = exported_headers(m)
    new_files = []
    stubs_before = active_stubs(top, m, n - 1)
    stubs_after = active_stubs(top, m, n)
    gone = [dest for src, dest in stubs_before.items() if src not in stubs_after]
    for dest in gone:
        os.remove(os.path.join(tree, dest))
    for src, dest in s.files + s.stubs:
        text = open(os.path.join(top, src)).read()
        if re.search(r'\.(c|h)$', dest):
            text = rewrite_includes(text, headers)
        path = os.path.join(tree, dest)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            new_files.append(dest)
        open(path, 'w').write(text)
        if dest.startswith('tests/qtest/') and dest.endswith('-test.c'):
            apply_qtest(tree, top, m, dest, s.qtest_timeout)
        if dest.startswith('docs/system/devices/') and dest.endswith('.rst'):
            apply_docs_index(tree, dest)
    if m['meson'] and (done - prev or stubs_before != stubs_after):
        apply_meson(tree, top, m, done, n, stubs_after.values())
    if m['kconfig']:
        apply_kconfig(tree, top, m, done, prev)
    if m['trace']:
        apply_trace(tree, top, m, n - 1)
    if m['maintainers']:
        apply_maintainers(tree, m, new_files, author, gone)
    if s.maintainers_in and patch_added:
        add_to_section(tree, s.maintainers_in, sorted(patch_added))
    body = '\n'.join(s.body).strip('\n')
    with open(msgfile, 'w') as f:
        if body:
            f.write(s.subject + '\n\n' + body + '\n')


def main(argv):
    cmd, top = argv[1], argv[2]
    try:
        if cmd == 'check':
            m = check(top)
            for i, s in enumerate(m['steps'], 1):
                print('%2d  %s' % (i, s.subject or 'patches/' + s.patch))
        elif cmd == 'plan':
            for i, s in enumerate(check(top)['steps'], 1):
                print('%d %s' % (i, s.patch or '-'))
        elif cmd == 'stages':
            m = check(top)
            for name, title, _ in m['stages']:
                last = max(i for i, s in enumerate(m['steps'], 1) if s.stage == name)
                print('%s %d %s' % (name, last, title))
        elif cmd == 'base':
            for p in sorted(check(top)['base_patches']):
                print(p)
        elif cmd == 'apply':
            apply(top, int(argv[3]), argv[4], argv[5], argv[6], argv[7:])
        elif cmd == 'cover':
            m = check(top)
            if not m['cover']:
                raise ManifestError('%s names no cover letter' % MANIFEST)
            sys.stdout.write(open(os.path.join(top, m['cover'])).read())
        else:
            raise ManifestError('unknown command %s' % cmd)
    except ManifestError as e:
        for line in str(e).split('\n'):
            sys.stderr.write('[cxlpod] error: %s\n' % line)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
