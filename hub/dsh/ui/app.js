// The dsh-computers settings page (spec §7, §10.6), plain browser JS, no build.
//
// Data: document-relative fetches of api/dsh-computers/... with the hub's
// client token as a Bearer header (the hub's "host request gate"). The token
// comes from the URL fragment (#token=..., never sent to a server) or from
// the sign-in form, and is kept in sessionStorage. /state is polled every
// 5 s, the connect dialog polls /key-status every 2 s, the runtime card
// polls /runtime every 5 s.
(function () {
  "use strict";

  var STATE_POLL_MS = 5000;
  var KEY_STATUS_POLL_MS = 2000;
  var RUNTIME_POLL_MS = 5000;
  var TOKEN_KEY = "dshc-token";

  var MESSAGES = {
    en: {
      title: "Computers",
      connectedTitle: "Connected computers",
      connect: "+ Connect computer",
      empty: "No computers yet. Connect one to run commands on it.",
      online: "Online",
      offline: "Offline",
      bot: "1/1 Bot",
      rename: "Rename",
      remove: "Delete",
      renameTitle: "Rename computer",
      nameLabel: "Name",
      save: "Save",
      cancel: "Cancel",
      close: "Close",
      deleteTitle: "Delete this computer?",
      deleteBody: "{name} will be disconnected and removed. Its agent stops until it is enrolled again.",
      connectTitle: "Connect computer",
      connectSubtitle: "Install Python 3.11+ on the computer you want to connect, then run the command below in its terminal.",
      replace: "Replace this computer's saved connection",
      replaceHint: "Turn this on when the terminal says there is another connection, then copy the command again.",
      copy: "Copy",
      copied: "Copied",
      waiting: "Waiting for the computer to connect…",
      connected: "{name} is connected.",
      rawHint: "You can also open Settings → Computers → This machine on the other computer's hub and enter the address and key below.",
      serverUrl: "Server URL",
      key: "Key",
      expired: "This key expired. Close the dialog and try again.",
      signInTitle: "Sign in",
      signInBody: "Paste a client token of this hub (tetherbed hub token create --kind client).",
      token: "Client token",
      signIn: "Sign in",
      rejected: "That token was not accepted.",
      runtimeTitle: "This machine",
      runtimeHint: "Let another hub run commands on this machine: paste that hub's address and an enrollment key from its Connect computer dialog.",
      runtimeConnect: "Connect",
      runtimeTarget: "Target server",
      runtimeEnabled: "Enabled",
      runtimeDisconnect: "Disconnect",
      runtimeConfirm: "Disconnect this machine from {server}?",
      running: "Running",
      stopped: "Stopped",
      connecting: "Connecting…",
      failed: "Connection failed",
      lastError: "Last error: {error}",
      drift: "agent {version}",
      updateRequired: "update required",
      lastSeen: "last seen {when}",
      failedRequest: "Request failed: {error}"
    },
    zh: {
      title: "电脑",
      connectedTitle: "已连接的电脑",
      connect: "+ 连接电脑",
      empty: "还没有电脑。连接一台后即可在上面运行命令。",
      online: "在线",
      offline: "离线",
      bot: "1/1 Bot",
      rename: "重命名",
      remove: "删除",
      renameTitle: "重命名电脑",
      nameLabel: "名称",
      save: "保存",
      cancel: "取消",
      close: "关闭",
      deleteTitle: "删除这台电脑?",
      deleteBody: "{name} 将被断开并移除,重新加入前其代理不会再连接。",
      connectTitle: "连接电脑",
      connectSubtitle: "在要连接的电脑上安装 Python 3.11+,然后在终端运行下方命令",
      replace: "覆盖这台电脑已保存的连接",
      replaceHint: "终端提示已有其他连接时开启,再重新复制命令",
      copy: "复制",
      copied: "已复制",
      waiting: "等待电脑连接…",
      connected: "{name} 已连接。",
      rawHint: "也可以在这台电脑的 DSH 桌面端打开 设置 → 电脑 → 本机运行时,填入下面的地址和密钥",
      serverUrl: "服务器地址",
      key: "密钥",
      expired: "密钥已过期,请关闭后重试。",
      signInTitle: "登录",
      signInBody: "粘贴此中心的客户端令牌(tetherbed hub token create --kind client)。",
      token: "客户端令牌",
      signIn: "登录",
      rejected: "令牌无效。",
      runtimeTitle: "本机运行时",
      runtimeHint: "让另一个中心在本机运行命令:填入该中心的地址和它的连接电脑对话框中的加入密钥。",
      runtimeConnect: "连接",
      runtimeTarget: "目标服务器",
      runtimeEnabled: "启用",
      runtimeDisconnect: "断开",
      runtimeConfirm: "断开与 {server} 的连接?",
      running: "运行中",
      stopped: "已停止",
      connecting: "连接中…",
      failed: "连接失败",
      lastError: "最近错误:{error}",
      drift: "代理 {version}",
      updateRequired: "需要更新",
      lastSeen: "最近在线 {when}",
      failedRequest: "请求失败:{error}"
    }
  };

  function pickLanguage() {
    var query = new URLSearchParams(location.search).get("lang");
    if (query && MESSAGES[query]) return query;
    var nav = (navigator.language || "en").toLowerCase();
    return nav.indexOf("zh") === 0 ? "zh" : "en";
  }
  var lang = pickLanguage();
  document.documentElement.lang = lang;

  function t(key, values) {
    var text = (MESSAGES[lang] && MESSAGES[lang][key]) || MESSAGES.en[key] || key;
    return text.replace(/\{(\w+)\}/g, function (_, name) {
      return values && values[name] != null ? String(values[name]) : "";
    });
  }

  // --- DOM ------------------------------------------------------------------

  function h(tag, attrs) {
    var el = document.createElement(tag);
    var key;
    for (key in attrs || {}) {
      var value = attrs[key];
      if (value == null || value === false) continue;
      if (key === "class") el.className = value;
      else if (key === "text") el.textContent = value;
      else if (key.indexOf("on") === 0) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : value);
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child == null || child === false) continue;
      el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return el;
  }

  // Icons as inline SVG: no icon font or emoji font is needed on the machine.
  var ICONS = {
    gear: "M12 15.5a3.5 3.5 0 1 0 0-7 3.5 3.5 0 0 0 0 7Zm7.4-2.5a7.6 7.6 0 0 0 0-2l2-1.6-2-3.4-2.4 1a7.4 7.4 0 0 0-1.7-1L15 3.5h-4l-.3 2.5a7.4 7.4 0 0 0-1.7 1l-2.4-1-2 3.4 2 1.6a7.6 7.6 0 0 0 0 2l-2 1.6 2 3.4 2.4-1a7.4 7.4 0 0 0 1.7 1l.3 2.5h4l.3-2.5a7.4 7.4 0 0 0 1.7-1l2.4 1 2-3.4-2-1.6Z",
    trash: "M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3"
  };

  function icon(name) {
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "18");
    svg.setAttribute("height", "18");
    svg.setAttribute("aria-hidden", "true");
    var path = document.createElementNS(ns, "path");
    path.setAttribute("d", ICONS[name]);
    path.setAttribute("fill", "none");
    path.setAttribute("stroke", "currentColor");
    path.setAttribute("stroke-width", "1.8");
    path.setAttribute("stroke-linecap", "round");
    path.setAttribute("stroke-linejoin", "round");
    svg.appendChild(path);
    return svg;
  }

  var root = document.getElementById("dshc-root");
  var toastEl = document.getElementById("dshc-toast");
  var toastTimer = null;

  function toast(text) {
    toastEl.textContent = text;
    toastEl.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { toastEl.hidden = true; }, 3000);
  }

  // --- the token and fetch --------------------------------------------------

  (function takeTokenFromFragment() {
    var match = /(?:^#|&)token=([^&]+)/.exec(location.hash || "");
    if (match) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
  })();

  function Unadmitted() {}

  function api(path, options) {
    options = options || {};
    var headers = { Accept: "application/json" };
    var token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    var init = { method: options.method || "GET", headers: headers, credentials: "same-origin" };
    if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.body);
    }
    return fetch("api/dsh-computers/" + path, init).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        if (response.status === 401 && body && body.error === "unadmitted") throw new Unadmitted();
        if (!response.ok) {
          var error = new Error((body && (body.message || body.error)) || "HTTP " + response.status);
          error.body = body;
          error.status = response.status;
          throw error;
        }
        return body;
      });
    });
  }

  // --- page state -----------------------------------------------------------

  var state = null;
  var runtime = null;
  var modal = null; // {el, close, onKey, previousFocus}
  var timers = [];

  function every(ms, fn) {
    var id = setInterval(fn, ms);
    timers.push(id);
    return id;
  }

  function failed(error) {
    if (error instanceof Unadmitted) return signIn(true);
    toast(t("failedRequest", { error: error.message }));
  }

  // Resolves true when the state was read, false when it was not.
  function refresh() {
    return api("state").then(function (body) {
      state = body;
      render();
      if (state.role !== "hub" && runtime === null) refreshRuntime();
      return true;
    }, function (error) {
      failed(error);
      return false;
    });
  }

  function refreshRuntime() {
    if (!state || state.role === "hub") return Promise.resolve();
    return api("runtime").then(function (body) { runtime = body; render(); }, failed);
  }

  // --- rendering --------------------------------------------------------------

  function render() {
    if (!state) return;
    var focusId = document.activeElement && document.activeElement.getAttribute("data-dshc");
    root.textContent = "";
    var showRuntime = state.role !== "hub";
    var showComputers = state.role !== "runtime";
    root.appendChild(
      h("header", { class: "dshc-header" },
        h("h1", { class: "dshc-title", text: t("title") }),
        showComputers ? h("button", {
          class: "dshc-button dshc-primary", type: "button", "data-dshc": "connect",
          onclick: openConnect, text: t("connect")
        }) : null)
    );
    if (showRuntime) root.appendChild(renderRuntime());
    if (showComputers) {
      if (showRuntime) root.appendChild(h("h2", { class: "dshc-card-title", text: t("connectedTitle") }));
      root.appendChild(renderList(state.computers || []));
    }
    if (focusId && !modal) {
      var again = root.querySelector('[data-dshc="' + focusId + '"]');
      if (again) again.focus();
    }
  }

  function renderList(computers) {
    if (!computers.length) {
      return h("div", { class: "dshc-list dshc-empty", "data-dshc": "empty", text: t("empty") });
    }
    var list = h("ul", { class: "dshc-list", "data-dshc": "computers" });
    computers.forEach(function (computer) {
      var online = !!computer.online;
      var sub = [computer.platformLabel, computer.hostname].filter(Boolean).join(" · ");
      if (!online && computer.lastSeenAt) {
        sub += " · " + t("lastSeen", { when: new Date(computer.lastSeenAt).toLocaleString() });
      }
      list.appendChild(
        h("li", { class: "dshc-row", "data-computer-id": computer.id,
                  "data-online": online ? "true" : "false" },
          h("div", { class: "dshc-row-main" },
            h("div", { class: "dshc-name", "data-dshc": "name", text: computer.name }),
            h("div", { class: "dshc-sub", text: sub })),
          computer.updateRequired ? h("span", { class: "dshc-badge dshc-badge-warn", text: t("updateRequired") })
            : computer.drift && computer.agentVersion ? h("span", { class: "dshc-badge",
                text: t("drift", { version: computer.agentVersion.split("+")[0] }) }) : null,
          h("span", { class: "dshc-badge", text: computer.bots && computer.bots.used ? t("bot") : "0/1 Bot" }),
          h("span", { class: "dshc-status", "data-dshc": "status" },
            h("span", { class: "dshc-dot", "data-state": online ? "online" : "offline" }),
            h("span", { text: online ? t("online") : t("offline") })),
          h("button", { class: "dshc-icon", type: "button", title: t("rename"), "aria-label": t("rename") + " " + computer.name,
                        "data-dshc": "rename-" + computer.id, onclick: function () { openRename(computer); } }, icon("gear")),
          h("button", { class: "dshc-icon dshc-danger", type: "button", title: t("remove"), "aria-label": t("remove") + " " + computer.name,
                        "data-dshc": "delete-" + computer.id, onclick: function () { openDelete(computer); } }, icon("trash")))
      );
    });
    return list;
  }

  function renderRuntime() {
    var card = h("section", { class: "dshc-card", "data-dshc": "runtime" },
      h("h2", { class: "dshc-card-title", text: t("runtimeTitle") }));
    if (!runtime) return card;
    if (!runtime.configured) {
      var server = h("input", { class: "dshc-input", id: "dshc-runtime-server", type: "url", required: true,
                                "data-dshc": "runtime-server", placeholder: "https://hub.example.com" });
      var key = h("input", { class: "dshc-input", id: "dshc-runtime-key", required: true,
                             "data-dshc": "runtime-key", placeholder: "dshc_…" });
      var error = h("p", { class: "dshc-error", "data-dshc": "runtime-error", hidden: true });
      card.appendChild(h("p", { class: "dshc-muted", text: t("runtimeHint") }));
      card.appendChild(h("div", { class: "dshc-field" }, h("label", { for: "dshc-runtime-server", text: t("serverUrl") }), server));
      card.appendChild(h("div", { class: "dshc-field" }, h("label", { for: "dshc-runtime-key", text: t("key") }), key));
      card.appendChild(h("button", {
        class: "dshc-button dshc-primary", type: "button", "data-dshc": "runtime-connect",
        onclick: function () {
          if (!server.value || !key.value) { server.reportValidity(); key.reportValidity(); return; }
          api("runtime/connect", { method: "POST", body: { serverUrl: server.value, key: key.value.trim() } })
            .then(function (body) { runtime = body; render(); }, function (err) {
              if (err instanceof Unadmitted) return signIn(true);
              error.hidden = false;
              error.textContent = err.message;
            });
        }, text: t("runtimeConnect")
      }));
      card.appendChild(error);
      return card;
    }
    var label = runtime.connected ? t("running") : !runtime.enabled ? t("stopped")
      : runtime.lastError ? t("failed") : t("connecting");
    var dot = runtime.connected ? "online" : runtime.enabled && runtime.lastError ? "failed" : "offline";
    card.appendChild(h("div", { class: "dshc-row", style: "padding:0" },
      h("div", { class: "dshc-row-main" },
        h("div", { class: "dshc-name", text: runtime.name || runtime.computerId }),
        h("div", { class: "dshc-sub", text: t("runtimeTarget") + ": " + runtime.serverUrl })),
      h("span", { class: "dshc-status", "data-dshc": "runtime-status" },
        h("span", { class: "dshc-dot", "data-state": dot }), h("span", { text: label })),
      h("button", {
        class: "dshc-switch", type: "button", role: "switch", "aria-checked": runtime.enabled ? "true" : "false",
        "aria-label": t("runtimeEnabled"), "data-dshc": "runtime-enabled",
        onclick: function () {
          api("runtime/enable", { method: "POST", body: { enabled: !runtime.enabled } })
            .then(function (body) { runtime = body; render(); }, failed);
        }
      }),
      h("button", {
        class: "dshc-button dshc-link dshc-danger", type: "button", "data-dshc": "runtime-disconnect",
        onclick: function () {
          confirmDialog(t("runtimeDisconnect"), t("runtimeConfirm", { server: runtime.serverUrl }), t("runtimeDisconnect"), function () {
            return api("runtime/disconnect", { method: "POST", body: {} }).then(function (body) { runtime = body; render(); });
          });
        }, text: t("runtimeDisconnect")
      })));
    if (runtime.lastError) card.appendChild(h("p", { class: "dshc-error", text: t("lastError", { error: runtime.lastError }) }));
    return card;
  }

  // --- dialogs ----------------------------------------------------------------

  function focusables(el) {
    return Array.prototype.filter.call(
      el.querySelectorAll("button, [href], input, select, textarea, [tabindex]:not([tabindex='-1'])"),
      function (node) { return !node.disabled && node.offsetParent !== null; });
  }

  function openModal(content, onClose, label) {
    closeModal();
    var previous = document.activeElement;
    var dialog = h("div", { class: "dshc-modal", role: "dialog", "aria-modal": "true", "aria-label": label }, content);
    var overlay = h("div", { class: "dshc-overlay", "data-dshc": "overlay" }, dialog);
    overlay.addEventListener("mousedown", function (event) { if (event.target === overlay) closeModal(); });
    function onKey(event) {
      if (event.key === "Escape") { event.preventDefault(); closeModal(); return; }
      if (event.key === "Tab") {
        var items = focusables(dialog);
        if (!items.length) return;
        var first = items[0], last = items[items.length - 1];
        if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
        else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
        else if (!dialog.contains(document.activeElement)) { event.preventDefault(); first.focus(); }
      }
    }
    document.addEventListener("keydown", onKey, true);
    document.body.appendChild(overlay);
    modal = { el: overlay, onKey: onKey, onClose: onClose, previous: previous };
    var items = focusables(dialog);
    (dialog.querySelector("[autofocus]") || items[0] || dialog).focus();
    return dialog;
  }

  function closeModal() {
    if (!modal) return;
    var current = modal;
    modal = null;
    document.removeEventListener("keydown", current.onKey, true);
    current.el.remove();
    if (current.onClose) current.onClose();
    if (current.previous && document.contains(current.previous)) current.previous.focus();
  }

  function confirmDialog(title, body, action, run) {
    var error = h("p", { class: "dshc-error", hidden: true });
    openModal([
      h("h2", { text: title }),
      h("p", { class: "dshc-muted", text: body }),
      error,
      h("div", { class: "dshc-actions" },
        h("button", { class: "dshc-button", type: "button", "data-dshc": "confirm-cancel", onclick: closeModal, text: t("cancel") }),
        h("button", { class: "dshc-button dshc-primary", type: "button", "data-dshc": "confirm", autofocus: true,
          onclick: function () {
            run().then(closeModal, function (err) {
              if (err instanceof Unadmitted) { closeModal(); return signIn(true); }
              error.hidden = false;
              error.textContent = err.message;
            });
          }, text: action }))
    ].reduce(function (frag, node) { frag.appendChild(node); return frag; }, document.createDocumentFragment()), null, title);
  }

  function openRename(computer) {
    var input = h("input", { class: "dshc-input", id: "dshc-rename-input", value: computer.name, maxlength: "64",
                             "data-dshc": "rename-input", autofocus: true });
    var error = h("p", { class: "dshc-error", "data-dshc": "rename-error", hidden: true });
    function save(event) {
      if (event) event.preventDefault();
      api("rename", { method: "POST", body: { id: computer.id, name: input.value } }).then(function (body) {
        closeModal();
        refresh();
      }, function (err) {
        if (err instanceof Unadmitted) { closeModal(); return signIn(true); }
        error.hidden = false;
        error.textContent = err.message;
      });
    }
    var form = h("form", { onsubmit: save },
      h("h2", { text: t("renameTitle") }),
      h("div", { class: "dshc-field" }, h("label", { for: "dshc-rename-input", text: t("nameLabel") }), input),
      error,
      h("div", { class: "dshc-actions" },
        h("button", { class: "dshc-button", type: "button", onclick: closeModal, text: t("cancel") }),
        h("button", { class: "dshc-button dshc-primary", type: "submit", "data-dshc": "rename-save", text: t("save") })));
    openModal(form, null, t("renameTitle"));
    input.select();
  }

  function openDelete(computer) {
    confirmDialog(t("deleteTitle"), t("deleteBody", { name: computer.name }), t("remove"), function () {
      return api("delete", { method: "POST", body: { id: computer.id } }).then(refresh);
    });
  }

  // The connect dialog: a key per (tab, replace) choice, polled until connected.
  function openConnect() {
    var os = /Win/.test(navigator.platform) ? "windows" : /Mac/.test(navigator.platform) ? "macos" : "linux";
    var replace = false;
    var current = null;
    var poll = null;
    var command = h("pre", { class: "dshc-code", "data-dshc": "command", "aria-label": "command" });
    var rawServer = h("code", { "data-dshc": "raw-server" });
    var rawKey = h("code", { "data-dshc": "raw-key" });
    var status = h("div", { class: "dshc-waiting", "data-dshc": "waiting" },
      h("span", { class: "dshc-spinner", "aria-hidden": "true" }), h("span", { text: t("waiting") }));
    var tabs = h("div", { class: "dshc-tabs", role: "tablist" });
    var switchButton = h("button", {
      class: "dshc-switch", type: "button", role: "switch", "aria-checked": "false",
      "aria-label": t("replace"), "data-dshc": "replace",
      onclick: function () {
        replace = !replace;
        switchButton.setAttribute("aria-checked", replace ? "true" : "false");
        createKey();
      }
    });

    function copyButton(source) {
      var button = h("button", { class: "dshc-button", type: "button", text: t("copy"),
        onclick: function () {
          var text = source().textContent;
          var done = function () { button.textContent = t("copied"); setTimeout(function () { button.textContent = t("copy"); }, 1500); };
          if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, done);
          else {
            var area = h("textarea", { style: "position:fixed;opacity:0" });
            area.value = text;
            document.body.appendChild(area);
            area.select();
            try { document.execCommand("copy"); } catch (e) { /* the text stays selectable */ }
            area.remove();
            done();
          }
        } });
      return button;
    }

    [["windows", "Windows"], ["macos", "macOS"], ["linux", "Linux"]].forEach(function (pair) {
      tabs.appendChild(h("button", {
        class: "dshc-tab", type: "button", role: "tab", "data-os": pair[0], "data-dshc": "tab-" + pair[0],
        "aria-selected": pair[0] === os ? "true" : "false",
        onclick: function () {
          os = pair[0];
          Array.prototype.forEach.call(tabs.children, function (tab) {
            tab.setAttribute("aria-selected", tab.getAttribute("data-os") === os ? "true" : "false");
          });
          createKey();
        }, text: pair[1]
      }));
    });

    function showCommand() {
      if (!current) return;
      command.textContent = current.os === "windows" ? current.windowsCommand : current.command;
      command.setAttribute("data-key", current.key);
      rawServer.textContent = current.serverUrl;
      rawKey.textContent = current.key;
    }

    function createKey() {
      return api("keys", { method: "POST", body: { os: os, replace: replace, label: null } }).then(function (body) {
        current = body;
        showCommand();
      }, function (err) { if (err instanceof Unadmitted) { closeModal(); signIn(true); } else toast(err.message); });
    }

    function checkStatus() {
      if (!current) return;
      api("key-status?key=" + encodeURIComponent(current.key)).then(function (body) {
        if (body.status === "connected") {
          var name = body.computer ? body.computer.name : "";
          closeModal();
          refresh();
          toast(t("connected", { name: name }));
        } else if (body.status === "expired") {
          status.textContent = t("expired");
        }
      }, function () { /* keep polling */ });
    }

    var content = document.createDocumentFragment();
    [
      h("h2", { text: t("connectTitle") }),
      h("p", { class: "dshc-muted", text: t("connectSubtitle") }),
      tabs,
      h("div", { class: "dshc-switch-row" }, switchButton, h("span", { text: t("replace") })),
      h("p", { class: "dshc-muted", text: t("replaceHint") }),
      h("div", { class: "dshc-command" }, command, copyButton(function () { return command; })),
      h("p", { class: "dshc-muted", text: t("rawHint") }),
      h("div", { class: "dshc-raw" },
        h("span", { text: t("serverUrl") }), rawServer, copyButton(function () { return rawServer; }),
        h("span", { text: t("key") }), rawKey, copyButton(function () { return rawKey; })),
      status,
      h("div", { class: "dshc-actions" },
        h("button", { class: "dshc-button", type: "button", "data-dshc": "connect-cancel", onclick: closeModal, text: t("cancel") }))
    ].forEach(function (node) { content.appendChild(node); });
    openModal(content, function () { clearInterval(poll); }, t("connectTitle"));
    createKey();
    poll = setInterval(checkStatus, KEY_STATUS_POLL_MS);
  }

  function signIn(rejected) {
    timers.forEach(clearInterval);
    timers = [];
    sessionStorage.removeItem(TOKEN_KEY);
    root.textContent = "";
    var input = h("input", { class: "dshc-input", id: "dshc-token", type: "password", autocomplete: "off",
                             "data-dshc": "token", autofocus: true });
    root.appendChild(h("section", { class: "dshc-card", "data-dshc": "sign-in" },
      h("h1", { class: "dshc-title", text: t("signInTitle") }),
      h("p", { class: "dshc-muted", text: t("signInBody") }),
      h("form", { onsubmit: function (event) {
          event.preventDefault();
          sessionStorage.setItem(TOKEN_KEY, input.value.trim());
          start();
        } },
        h("div", { class: "dshc-field" }, h("label", { for: "dshc-token", text: t("token") }), input),
        rejected ? h("p", { class: "dshc-error", "data-dshc": "rejected", text: t("rejected") }) : null,
        h("button", { class: "dshc-button dshc-primary", type: "submit", "data-dshc": "sign-in-submit", text: t("signIn") }))));
    input.focus();
  }

  function start() {
    if (!sessionStorage.getItem(TOKEN_KEY)) return signIn(false);
    refresh().then(function (ok) {
      if (!ok || timers.length) return;
      every(STATE_POLL_MS, refresh);
      every(RUNTIME_POLL_MS, refreshRuntime);
    });
  }

  window.addEventListener("pagehide", function () { timers.forEach(clearInterval); });
  start();
})();
