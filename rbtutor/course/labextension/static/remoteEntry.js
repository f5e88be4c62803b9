// rbtutor-validate: a JupyterLab extension without a build step, for the students' Assignment List.
//
// Validate. nbgrader's dialog says "Success! Your notebook passes all the tests." whenever no cell
// raised, which a student reads as "my values are right", and otherwise shows one block per failed
// cell, the same hint repeated in each. rbtutor's answer cells only check the form of an answer (its
// type, shape and units); values are judged by the grader after submission. This extension rewrites
// the dialog: one summary line first ("2 of 5 parts need work: (b), (d)"), then one block per part
// that has a wrong form or an error, named by its part and question (from the notebook's own cells),
// with unanswered parts together in one line; a notebook whose answers all have the right form gets
// one line. It only rearranges what nbgrader rendered: Validate sends nothing more (no check is spent).
//
// Submit. Before anything is sent, a dialog gives the student's own due date (with an extension),
// the time left or how late the submission would be and what that costs under the course's late
// policy, and the result of the last Validate of each notebook (or that it was not validated since
// the last change). Cancel sends nothing. The Assignment List shows each assignment's due date.
//
// The due dates come from the hub's personalising service (rbtutor.course.fetch_service,
// GET <hub>/services/rbtutor-fetch/api/due-dates), which answers for the user the hub logged in and
// no one else; the grader reads the same due-dates file. The page is loaded in a hidden frame: a
// page load passes the hub's OAuth by itself and needs no _xsrf value. The result of the last
// Validate of a notebook is kept in this browser (localStorage) with the notebook's modification time.
//
// Waits. nbgrader only relabels the button it runs ("Validating...") and disables it. Beside such a
// button a line says what is being done, for how long so far, against how long it usually takes in this
// browser (the median of the last ten, kept in localStorage), with a bar that fills towards that
// time and turns into a moving bar once it is past; the line goes when nbgrader is done.
//
// JupyterLab loads a prebuilt extension as a module-federation container registered on
// window._JUPYTERLAB[name] with init() and get(module); this file is that container, by hand.
(function () {
  "use strict";

  var FETCH_SERVICE = "services/rbtutor-fetch/api/due-dates";
  var ON_HUB = "on the course hub, check(answer_id, value) in a cell tells you now";
  var DAY = 86400000;
  var WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
  var MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December"];
  var STYLE = [
    "#validation-message pre, #validation-message .rbtutor-reason, #rbtutor-submit-confirm p {",
    "  white-space: pre-wrap; overflow-wrap: anywhere; }",
    "#validation-message .rbtutor-summary { font-weight: bold; }",
    "#validation-message .rbtutor-part { border-left: 3px solid var(--jp-warn-color1, #f57c00);",
    "  padding: 2px 0 2px 8px; margin: 8px 0; }",
    "#validation-message .rbtutor-part h3 { margin: 0 0 4px 0; font-size: var(--jp-content-font-size2, 1.2em); }",
    "#validation-message .rbtutor-reason { font-family: var(--jp-code-font-family, monospace);",
    "  background: var(--jp-layout-color2, #eee); padding: 4px 6px; margin: 4px 0; }",
    "#validation-message .rbtutor-question { color: var(--jp-ui-font-color2, #555); }",
    "#rbtutor-submit-confirm { position: fixed; inset: 0; z-index: 10001; display: flex; align-items: center;",
    "  justify-content: center; background: var(--jp-dialog-background, rgba(0, 0, 0, 0.25)); }",
    "#rbtutor-submit-confirm .jp-Dialog-content { max-width: 640px; display: flex; flex-direction: column;",
    "  gap: 4px; padding: 24px; }",
    "#rbtutor-submit-confirm .jp-Dialog-footer { display: flex; flex-direction: row; justify-content: flex-end;",
    "  gap: 8px; padding-top: 12px; }",
    "#rbtutor-submit-confirm .rbtutor-late { color: var(--jp-error-color1, #d32f2f); font-weight: bold; }",
    ".rbtutor-due { color: var(--jp-ui-font-color1, #333); }",
    ".rbtutor-busy { display: flex; align-items: center; gap: 8px; padding: 2px 0 6px 0;",
    "  color: var(--jp-ui-font-color1, #333); }",
    ".rbtutor-busy progress { width: 140px; flex: none; }",
    ".rbtutor-due.rbtutor-late { color: var(--jp-error-color1, #d32f2f); }"
  ].join("\n");

  var app = null;  // the JupyterLab application, given to activate()
  var lastValidate = null;  // {path, at}: the notebook whose Validate button was pressed last

  // ------------------------------------------------------------------------------------- small helpers

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.innerText = text;
    if (className) node.className = className;
    return node;
  }

  function pageConfig() {
    var node = document.getElementById("jupyter-config-data");
    try { return node ? JSON.parse(node.textContent) : {}; } catch (e) { return {}; }
  }

  function two(n) { return (n < 10 ? "0" : "") + n; }

  // "Monday 04 March 2030, 12:00 UTC": the same in every browser and time zone
  function utcText(ms) {
    var d = new Date(ms);
    return WEEKDAYS[d.getUTCDay()] + " " + two(d.getUTCDate()) + " " + MONTHS[d.getUTCMonth()] + " " +
      d.getUTCFullYear() + ", " + two(d.getUTCHours()) + ":" + two(d.getUTCMinutes()) + " UTC";
  }

  // a duration: "3 days 4 h", "5 h 12 min", "12 min", "less than a minute"
  function spanText(ms) {
    var minutes = Math.floor(ms / 60000), days = Math.floor(minutes / 1440);
    var hours = Math.floor((minutes % 1440) / 60), rest = minutes % 60;
    if (days > 0) return days + (days === 1 ? " day " : " days ") + hours + " h";
    if (hours > 0) return hours + " h " + two(rest) + " min";
    return minutes > 0 ? minutes + " min" : "less than a minute";
  }

  // From the last line that names an exception to the end, when lines come before it; else null.
  function lastError(text) {
    var lines = text.replace(/\s+$/, "").split("\n");
    for (var j = lines.length - 1; j > 0; j--) {
      if (/^[A-Za-z_][\w.]*(Error|Exception|Failed)\b/.test(lines[j])) return lines.slice(j).join("\n");
    }
    return null;
  }

  function folded(title, node) {
    var fold = el("details");
    fold.append(el("summary", title));
    fold.append(node);
    return fold;
  }

  function source(cell) {
    return Array.isArray(cell.source) ? cell.source.join("") : String(cell.source || "");
  }

  function nbgraderOf(cell) { return (cell.metadata && cell.metadata.nbgrader) || {}; }

  // ------------------------------------------------------------------ the notebook: parts and questions

  // The notebook (nbformat JSON) at ``path``: the open panel's model when the notebook is open, else the
  // saved file (what Validate ran on); null when neither can be had.
  function notebookAt(path) {
    if (!app || !path) return Promise.resolve(null);
    try {
      var widgets = app.shell.widgets("main");
      for (var w of widgets) {
        if (w.context && w.context.path === path && w.context.model && w.context.model.toJSON) {
          return Promise.resolve(w.context.model.toJSON());
        }
      }
    } catch (e) { /* an older shell: read the file */ }
    return app.serviceManager.contents.get(path, { content: true })
      .then(function (model) { return model.content; }, function () { return null; });
  }

  // Every graded cell of the notebook with its part: [{index, part, title, question, name, grade_id}].
  // A part is the nearest heading above a cell that starts "(b)" or "2(a)"; the question is the nearest
  // markdown cell above it that nbgrader does not grade (without its heading line).
  function gradedCells(nb) {
    var out = [], part = null, title = "", question = "";
    (nb && nb.cells || []).forEach(function (cell, index) {
      var meta = nbgraderOf(cell), text = source(cell);
      if (cell.cell_type === "markdown" && !meta.grade && !meta.solution) {
        var first = text.split("\n")[0];
        var heading = /^#{1,4}\s*(\d*\s*\([a-z]\)|\d+[a-z]?\))\s*(.*)$/.exec(first);
        if (heading) {
          part = heading[1].replace(/\s+/g, "");
          title = heading[2].replace(/\$/g, "");
          question = text.split("\n").slice(1).join("\n").trim();
        } else if (!/^#/.test(first)) {
          question = text.trim();
        }
        return;
      }
      if (!meta.grade) return;
      var named = /check_form\(\s*["']([^"']+)["']/.exec(text);
      var fromId = /^p\d+_([a-z])_/.exec(meta.grade_id || "");
      out.push({ index: index, part: part || (fromId ? "(" + fromId[1] + ")" : "(" + (meta.grade_id || "?") + ")"),
        title: title, question: question, grade_id: meta.grade_id || "",
        name: named ? named[1] : (cell.cell_type === "markdown" ? "written answer" : meta.grade_id || "a test") });
    });
    return out;
  }

  function partsOf(cells) {
    var seen = [];
    cells.forEach(function (c) { if (seen.indexOf(c.part) < 0) seen.push(c.part); });
    return seen;
  }

  // ------------------------------------------------------------------------- the Validate dialog

  // nbgrader renders each failed cell as: <div><p>intro</p></div>, <div>source</div>, <div>error</div>
  function failuresIn(message) {
    var blocks = Array.prototype.slice.call(message.children), out = [];
    for (var i = 0; i + 2 < blocks.length; i += 3) {
      out.push({ source: blocks[i + 1].innerText.replace(/\s+$/, ""), error: blocks[i + 2].innerText });
    }
    return out;
  }

  // what went wrong in one failed cell: {kind: "unanswered" | "form" | "error", reason, traceback}
  function classify(error) {
    var form = /Form check failed: ([\s\S]*)$/.exec(error);
    if (form) return { kind: "form", reason: form[1].trim() };
    if (/NameError: name '[^']+' is not defined|NotImplementedError|You did not provide a response/.test(error)) {
      return { kind: "unanswered" };
    }
    return { kind: "error", reason: lastError(error) || error.trim(), traceback: error };
  }

  // Each failure with its graded cell (matched by source, in notebook order, as nbgrader lists them).
  function matchCells(failures, cells, nb) {
    var from = 0;
    return failures.map(function (f) {
      var found = null;
      for (var k = from; k < cells.length; k++) {
        if (flat(source(nb.cells[cells[k].index])) === flat(f.source)) { found = cells[k]; from = k + 1; break; }
      }
      var what = classify(f.error);
      what.cell = found || { part: "(?)", title: "", question: "", name: "a cell", grade_id: "" };
      what.source = f.source;
      return what;
    });
  }

  function partLabel(part, title) { return title ? part + " " + title : part; }

  // "K: should have shape ()..." from "K should have shape ()...": the answer's name once, first
  function named(name, reason) {
    return reason.indexOf(name + " ") === 0 ? name + ": " + reason.slice(name.length + 1) : name + ": " + reason;
  }

  // a question's markdown as text: without the marks of math and code
  function plain(text) { return text.replace(/\$\$?|`/g, "").replace(/\*\*/g, ""); }

  function flat(text) { return text.replace(/\s+/g, " ").trim(); }

  // the summary line, the one line of unanswered parts, and the blocks: rendered into ``message``
  function renderFailed(message, failures, nb) {
    var cells = gradedCells(nb), parts = partsOf(cells);
    var found = matchCells(failures, cells, nb);
    var needing = partsOf(found.map(function (f) { return f.cell; }));
    message.innerHTML = "";
    var total = parts.length ? parts.length : needing.length;
    var summary = needing.length + " of " + total + (total === 1 ? " part needs" : " parts need") + " work: " +
      needing.join(", ");
    message.append(el("p", summary, "rbtutor-summary"));

    var unanswered = {}, order = [];
    found.forEach(function (f) {
      if (f.kind !== "unanswered") return;
      if (!unanswered[f.cell.part]) { unanswered[f.cell.part] = []; order.push(f.cell.part); }
      if (unanswered[f.cell.part].indexOf(f.cell.name) < 0) unanswered[f.cell.part].push(f.cell.name);
    });
    if (order.length) {
      var line = order.map(function (p) { return p + " " + unanswered[p].join(", "); }).join("; ");
      message.append(el("p", "Not answered yet: " + line + ". Put your answer in the answer cell of each " +
        "(the name shown, or the text cell of a written answer) and run it.", "rbtutor-unanswered"));
    }

    var byPart = {}, partOrder = [];
    found.forEach(function (f) {
      if (f.kind === "unanswered") return;
      if (!byPart[f.cell.part]) { byPart[f.cell.part] = []; partOrder.push(f.cell.part); }
      byPart[f.cell.part].push(f);
    });
    partOrder.forEach(function (p) {
      var block = el("div", null, "rbtutor-part");
      var first = byPart[p][0].cell;
      block.append(el("h3", partLabel(p, first.title)));
      if (first.question) block.append(el("p", plain(first.question), "rbtutor-question"));
      byPart[p].forEach(function (f) {
        block.append(el("div", f.kind === "form" ? named(f.cell.name, f.reason) : f.reason, "rbtutor-reason"));
        if (f.traceback) block.append(folded("The traceback", el("pre", f.traceback)));
        block.append(folded("The cell", el("pre", f.source)));
      });
      message.append(block);
    });
    return summary;
  }

  function renderPassed(message, nb) {
    var cells = gradedCells(nb), parts = partsOf(cells);
    var count = parts.length ? "all " + parts.length + " parts answered, and every answer has"
      : "every answer has";
    var text = "Form checks passed: " + count + " the type and shape the problem asks for. Whether the values " +
      "are right is graded after you submit (" + ON_HUB + ").";
    message.innerHTML = "";
    message.append(el("p", text, "rbtutor-summary"));
    return "form checks passed" + (parts.length ? ", all " + parts.length + " parts answered" : "");
  }

  function remember(path, ok, summary) {
    if (!path || !app) return;
    app.serviceManager.contents.get(path, { content: false }).then(function (model) {
      localStorage.setItem("rbtutor-validate:" + path, JSON.stringify(
        { at: Date.now(), ok: ok, summary: summary, modified: model.last_modified }));
    }, function () { /* the notebook cannot be read: nothing is remembered */ });
  }

  function reword(message) {
    if (message.dataset.rbtutor) return;
    message.dataset.rbtutor = "done";
    var passed = message.classList.contains("validation-success");
    var failed = message.classList.contains("validation-failed");
    if (!passed && !failed) return;  // changed or retyped locked cells, an error of nbgrader: as it says
    var path = lastValidate && Date.now() - lastValidate.at < 600000 ? lastValidate.path : currentPath();
    var failures = failed ? failuresIn(message) : [];
    message.style.visibility = "hidden";  // until it is rewritten (a moment: the notebook is read)
    notebookAt(path).then(function (nb) {
      var summary = passed ? renderPassed(message, nb) : renderFailed(message, failures, nb || { cells: [] });
      remember(path, passed, summary);
    }).catch(function (exc) {
      console.error("rbtutor-validate: the dialog could not be rewritten", exc);
    }).then(function () { message.style.visibility = ""; });
  }

  function currentPath() {
    var widget = app && app.shell.currentWidget;
    return widget && widget.context ? widget.context.path : null;
  }

  // -------------------------------------------------------------------------------- due dates

  var dueCache = null;  // {at, promise}

  // The student's own due dates from the fetch service: {reply, skew} (skew: server time - this clock).
  function dueDates(fresh) {
    if (dueCache && !fresh && Date.now() - dueCache.at < 60000) return dueCache.promise;
    var config = pageConfig();
    if (!config.hubPrefix) {
      return Promise.reject(new Error("due dates are shown on the course hub only"));
    }
    var url = config.hubPrefix.replace(/hub\/?$/, "") + FETCH_SERVICE;
    var promise = new Promise(function (resolve, reject) {
      var frame = document.createElement("iframe");
      frame.style.display = "none";
      frame.setAttribute("aria-hidden", "true");
      var timer = setTimeout(function () { frame.remove(); reject(new Error("the course hub did not answer")); },
        30000);
      frame.onload = function () {
        var text = "", reply = null;
        try {  // a JSON page is shown as one <pre>
          var doc = frame.contentDocument, pre = doc.querySelector("pre");
          text = pre ? pre.textContent : doc.body.textContent;
        } catch (e) { text = ""; }
        try { reply = JSON.parse(text); } catch (e) { reply = null; }
        if (!reply) return;  // a page of the hub's log-in: wait for the next page, or the time-out
        clearTimeout(timer);
        frame.remove();
        if (reply.error || !reply.late) reject(new Error(reply.error || "an unexpected reply of the course hub"));
        else resolve({ reply: reply, skew: Date.parse(reply.now) - Date.now() });
      };
      frame.src = url;
      document.body.append(frame);
    });
    dueCache = { at: Date.now(), promise: promise };
    promise.catch(function () { dueCache = null; });
    return promise;
  }

  // what the student sees about one assignment: {due, text, late, ms} (ms: time left, negative when late)
  function dueOf(data, assignment) {
    var reply = data.reply;
    if (reply.due_dates === null) return { text: "Due date not available (the course's file cannot be read)" };
    var entry = reply.assignments[assignment];
    if (!entry) return { text: "No due date: not late whenever you submit" };
    var due = Date.parse(entry.due), now = Date.now() + data.skew, ms = due - now;
    var when = "Due " + utcText(due) + (entry.extended ? " (your extension)" : "");
    var left = ms >= 0 ? spanText(ms) + " left" : "late by " + spanText(-ms);
    return { due: due, entry: entry, ms: ms, late: ms < 0, text: when + "; " + left };
  }

  // what handing in ``ms`` after the due date costs under the late policy, in words
  function lateCost(ms, late) {
    var days = Math.ceil(ms / DAY), share = Math.min(100, days * late.percent_per_day);
    return "that is " + days + (days === 1 ? " started day" : " started days") + ", so " + share.toFixed(0) +
      " % of each notebook's score is taken off (the course's late policy: " + late.percent_per_day + " % for " +
      "every day, or part of a day, after your own due date, never more than the score).";
  }

  function assignmentName(row) {
    var name = row.querySelector(":scope > .col-md-12 > .item_name");
    return name ? name.innerText.trim() : "";
  }

  function decorateLists() {
    var rows = document.querySelectorAll("#released_assignments_list > .list_item, " +
      "#fetched_assignments_list > .list_item");
    if (!rows.length) return;
    dueDates().then(function (data) {
      rows.forEach(function (row) { showDue(row, dueOf(data, assignmentName(row))); });
    }, function (exc) {
      rows.forEach(function (row) { showDue(row, { text: "Due date not available: " + exc.message }); });
    });
  }

  function showDue(row, due) {
    var line = row.querySelector(":scope > .col-md-12");
    if (!line) return;
    var name = line.querySelector(":scope > .item_name");
    var cell = line.querySelector(":scope > .rbtutor-due");
    if (!cell) {
      cell = el("span", null, "rbtutor-due col-sm-4");
      if (name) { name.classList.remove("col-sm-6"); name.classList.add("col-sm-2"); name.after(cell); }
      else line.prepend(cell);
    }
    cell.innerText = due.text;
    cell.classList.toggle("rbtutor-late", !!due.late);
  }

  // ----------------------------------------------------------------------------- the Submit dialog

  function lastValidateText(path) {
    var saved = null;
    try { saved = JSON.parse(localStorage.getItem("rbtutor-validate:" + path) || "null"); } catch (e) { saved = null; }
    var name = path.split("/").pop();
    return app.serviceManager.contents.get(path, { content: false }).then(function (model) {
      if (!saved || saved.modified !== model.last_modified) return name + ": not validated since your last change.";
      var at = new Date(saved.at);
      return name + ", validated at " + two(at.getHours()) + ":" + two(at.getMinutes()) + ": " + saved.summary + ".";
    }, function () { return name + ": not validated since your last change."; });
  }

  function confirmSubmit(button) {
    var row = button.closest(".list_item");
    var assignment = assignmentName(row);
    var notebooks = Array.prototype.map.call(row.querySelectorAll(".assignment-notebooks .item_name a"),
      function (a) { return assignment + "/" + a.innerText.trim() + ".ipynb"; });

    var dialog = el("div", null, "jp-Dialog rbtutor-Dialog");
    dialog.id = "rbtutor-submit-confirm";
    dialog.setAttribute("role", "dialog");
    dialog.setAttribute("aria-modal", "true");
    var content = el("div", null, "jp-Dialog-content");
    var header = el("div", "Submit " + assignment + "?", "jp-Dialog-header");
    var body = el("div", null, "jp-Dialog-body");
    var due = el("p", "Reading your due date…", "rbtutor-due-line");
    var left = el("p", "", "rbtutor-time-left");
    var checks = el("div", null, "rbtutor-last-validate");
    body.append(due, left, checks);
    var footer = el("div", null, "jp-Dialog-footer");
    var cancel = el("button", null, "jp-Dialog-button jp-mod-reject jp-mod-styled");
    cancel.append(el("div", "Cancel", "jp-Dialog-buttonLabel"));
    var submit = el("button", null, "jp-Dialog-button jp-mod-accept jp-mod-styled");
    submit.append(el("div", "Submit", "jp-Dialog-buttonLabel"));
    footer.append(cancel, submit);
    content.append(header, body, footer);
    dialog.append(content);
    document.body.append(dialog);
    cancel.focus();

    function close() { dialog.remove(); document.removeEventListener("keydown", onKey, true); }
    function onKey(event) { if (event.key === "Escape") { event.stopPropagation(); close(); } }
    document.addEventListener("keydown", onKey, true);
    cancel.onclick = close;
    submit.onclick = function () {
      close();
      button.dataset.rbtutorConfirmed = "yes";
      button.click();
    };

    dueDates(true).then(function (data) {
      var own = dueOf(data, assignment);
      if (own.due === undefined) { due.innerText = own.text + "."; left.innerText = ""; return; }
      due.innerText = "Your due date: " + utcText(own.due) + (own.entry.extended
        ? ", your extension (the class's: " + utcText(Date.parse(own.entry.class_due)) + ")." : ".");
      if (own.late) {
        left.innerText = "Submitting now is late by " + spanText(-own.ms) + ", " + lateCost(-own.ms, data.reply.late);
        left.classList.add("rbtutor-late");
      } else {
        left.innerText = "Time left: " + spanText(own.ms) + ".";
      }
    }, function (exc) {
      due.innerText = "Your due date could not be read (" + exc.message + "); the grader still applies it.";
    });
    if (!notebooks.length) checks.append(el("p", "No notebook of " + assignment + " found to report on."));
    notebooks.forEach(function (path) {
      var line = el("p", "…", "rbtutor-validate-line");
      checks.append(line);
      lastValidateText(path).then(function (text) { line.innerText = "Last Validate: " + text; });
    });
  }

  // ------------------------------------------------------------------------------------------ waits

  // nbgrader's label while it works, and what it is doing then
  var BUSY = { "Fetching...": "fetch", "Validating...": "validate", "submitting...": "submit",
    "Fetching Feedback...": "feedback" };
  var DOING = { fetch: "Fetching %s with your own numbers", validate: "Validating %s: every cell runs",
    submit: "Submitting %s", feedback: "Fetching the feedback on %s" };
  var FIRST_GUESS = { fetch: 5, validate: 15, submit: 4, feedback: 4 };  // seconds, before a wait was timed here
  var KEPT = 10;

  function usualSeconds(action) {
    var past = [];
    try { past = JSON.parse(localStorage.getItem("rbtutor-wait:" + action) || "[]"); } catch (e) { past = []; }
    if (!Array.isArray(past) || !past.length) return FIRST_GUESS[action];
    var sorted = past.slice().sort(function (a, b) { return a - b; }), middle = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  }

  function rememberWait(action, seconds) {
    var past = [];
    try { past = JSON.parse(localStorage.getItem("rbtutor-wait:" + action) || "[]"); } catch (e) { past = []; }
    if (!Array.isArray(past)) past = [];
    past.push(Math.round(seconds * 10) / 10);
    try { localStorage.setItem("rbtutor-wait:" + action, JSON.stringify(past.slice(-KEPT))); } catch (e) { /* full */ }
  }

  function waitText(action, name, elapsed, usual) {
    var doing = DOING[action].replace("%s", name) + "… " + Math.floor(elapsed) + " s so far";
    if (elapsed <= usual) return doing + " (usually about " + Math.round(usual) + " s here)";
    return doing + ", longer than the usual " + Math.round(usual) + " s: a busy hub is slower, please wait";
  }

  // What the button of ``row`` acts on: the notebook of a Validate row, else the assignment.
  function actedOn(button, action) {
    var row = button.closest(".list_item");
    var link = action === "validate" && row && row.querySelector(".item_name a");
    if (link) return link.innerText.trim() + ".ipynb";
    var outer = row && (row.closest("#released_assignments_list > .list_item, #fetched_assignments_list > " +
      ".list_item, #submitted_assignments_list > .list_item") || row);
    return (outer && assignmentName(outer)) || "the assignment";
  }

  // Once nbgrader has relabelled ``button``: a line under its row until the label changes back or the
  // list is redrawn.
  function showWait(button) {
    var action = BUSY[button.innerText.trim()];
    var row = button.closest(".list_item");
    if (!action || !row || row.querySelector(":scope > .rbtutor-busy")) return;
    var label = button.innerText.trim(), name = actedOn(button, action), usual = usualSeconds(action);
    var line = el("div", null, "rbtutor-busy col-md-12");
    line.setAttribute("role", "status");
    line.dataset.action = action;
    var bar = el("progress");
    bar.max = 100;
    var words = el("span", waitText(action, name, 0, usual), "rbtutor-busy-text");
    line.append(bar, words);
    row.append(line);
    var started = Date.now();
    function tick() {
      var elapsed = (Date.now() - started) / 1000;
      if (!button.isConnected || button.innerText.trim() !== label) {
        clearInterval(timer);
        line.remove();
        rememberWait(action, elapsed);
        return;
      }
      if (elapsed <= usual) bar.value = Math.min(95, 100 * elapsed / usual);
      else bar.removeAttribute("value");  // past the usual time: a moving bar, no made-up share
      words.innerText = waitText(action, name, elapsed, usual);
    }
    var timer = setInterval(tick, 1000);
    tick();
  }

  // ------------------------------------------------------------------------------------- wiring

  function onClick(event) {
    var button = event.target.closest && event.target.closest("button");
    if (!button) return;
    var label = button.innerText.trim();
    setTimeout(function () { showWait(button); }, 0);  // after nbgrader's own handler has relabelled it
    if (label === "Validate") {
      var row = button.closest(".nested_list_item"), outer = button.closest(".assignment-notebooks");
      var link = row && row.querySelector(".item_name a");
      var item = outer && outer.parentElement;
      if (link && item) {
        lastValidate = { path: assignmentName(item) + "/" + link.innerText.trim() + ".ipynb", at: Date.now() };
      } else {
        lastValidate = { path: currentPath(), at: Date.now() };
      }
    } else if (label === "Submit" && button.closest("#fetched_assignments_list")) {
      if (button.dataset.rbtutorConfirmed === "yes") {  // confirmed in the dialog: nbgrader submits
        delete button.dataset.rbtutorConfirmed;
        return;
      }
      event.preventDefault();
      event.stopImmediatePropagation();
      confirmSubmit(button);
    }
  }

  var pending = null;
  function scan(root) {
    if (!root.querySelectorAll) return;
    if (root.id === "validation-message") reword(root);
    root.querySelectorAll("#validation-message").forEach(reword);
    if (root.classList && root.classList.contains("list_item") || root.querySelector(".list_item")) {
      clearTimeout(pending);
      pending = setTimeout(decorateLists, 50);
    }
  }

  var plugin = {
    id: "rbtutor-validate:plugin",
    description: "Validate gives a summary by part; Submit asks first, with the due date and the last Validate; " +
      "a wait of the Assignment List says what is being done and for how long.",
    autoStart: true,
    activate: function (application) {
      app = application;
      var style = document.createElement("style");
      style.id = "rbtutor-validate-style";
      style.textContent = STYLE;
      document.head.append(style);
      document.addEventListener("click", onClick, true);
      new MutationObserver(function (records) {
        records.forEach(function (record) { record.addedNodes.forEach(scan); });
      }).observe(document.body, { childList: true, subtree: true });
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB["rbtutor-validate"] = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error("rbtutor-validate has no module " + module));
      }
      return Promise.resolve(function () { return { __esModule: true, default: plugin }; });
    }
  };
})();
