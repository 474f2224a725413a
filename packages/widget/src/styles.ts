// The dark palette, used by `color_scheme: "dark"` and by `auto` under a dark preference.
const DARK = `--_bg:var(--channelkit-background,#111827);--_fg:var(--channelkit-foreground,#f9fafb);--_surface:var(--channelkit-surface,#1f2937);--_border:var(--channelkit-border,#4b5563);--_muted:#d1d5db;--_error-bg:#450a0a;--_error-fg:#fecaca;color-scheme:dark`;

/**
 * The widget's whole stylesheet, scoped by its shadow root. Pages theme it with the
 * `--channelkit-*` custom properties on the host (see README); the configuration's colour
 * is the default of `--channelkit-primary`. The panel's colours meet WCAG AA contrast.
 */
export const STYLES = `
:host{display:block}
:host([hidden]){display:none}
[hidden]{display:none!important}
.root{all:initial;position:fixed;z-index:var(--channelkit-z-index,2147483000);bottom:var(--channelkit-offset,20px);right:var(--channelkit-offset,20px);
--_primary:var(--channelkit-primary,var(--_config-primary,#4338ca));--_on-primary:var(--channelkit-on-primary,var(--_config-on-primary,#fff));
--_radius:var(--channelkit-radius,16px);
--_bg:var(--channelkit-background,#fff);--_fg:var(--channelkit-foreground,#111827);--_surface:var(--channelkit-surface,#f3f4f6);--_border:var(--channelkit-border,#d1d5db);--_muted:#4b5563;--_error-bg:#fef2f2;--_error-fg:#991b1b;color-scheme:light;
font-family:var(--channelkit-font,system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif);font-size:15px;line-height:1.45;color:var(--_fg);text-align:start;visibility:hidden}
.root[data-scheme=dark]{${DARK}}
@media (prefers-color-scheme:dark){.root[data-scheme=auto]{${DARK}}}
.root[data-position=bottom-left]{right:auto;left:var(--channelkit-offset,20px)}
.root[data-state]{visibility:visible}
*,*::before,*::after{box-sizing:border-box}
button,textarea{font:inherit;color:inherit;margin:0}
button{cursor:pointer}
button:disabled{cursor:not-allowed;opacity:.6}
:focus-visible{outline:2px solid var(--_fg);outline-offset:2px}
.launcher{width:56px;height:56px;border-radius:50%;border:0;padding:0;display:grid;place-items:center;background:var(--_primary);color:var(--_on-primary);box-shadow:0 4px 14px rgba(0,0,0,.25)}
.launcher:focus-visible{outline:0;box-shadow:0 0 0 3px #fff,0 0 0 6px #111827}
.launcher svg,.close svg{width:24px;height:24px;fill:none;stroke:currentColor;stroke-width:2;stroke-linecap:round;stroke-linejoin:round}
.panel{position:absolute;bottom:72px;right:0;width:min(380px,calc(100vw - 2*var(--channelkit-offset,20px)));height:min(560px,calc(100vh - 120px));display:flex;flex-direction:column;overflow:hidden;background:var(--_bg);color:var(--_fg);border:1px solid var(--_border);border-radius:var(--_radius);box-shadow:0 12px 40px rgba(0,0,0,.25)}
.root[data-position=bottom-left] .panel{right:auto;left:0}
.header{display:flex;align-items:flex-start;gap:8px;padding:14px 12px 14px 16px;background:var(--_primary);color:var(--_on-primary)}
.heading{flex:1;min-width:0}
.title{margin:0;font-size:16px;font-weight:600}
.subtitle{margin:2px 0 0;font-size:13px}
.close{flex:none;width:32px;height:32px;display:grid;place-items:center;border:0;border-radius:8px;background:transparent;color:inherit;padding:0}
.close svg{width:20px;height:20px}
.close:focus-visible{outline-color:currentColor}
.log{flex:1;overflow-y:auto;padding:16px;display:flex;flex-direction:column;gap:8px}
.message{max-width:85%;padding:8px 12px;border-radius:calc(var(--_radius) * .75);white-space:pre-wrap;overflow-wrap:anywhere}
.message[data-role=user]{align-self:flex-end;background:var(--_primary);color:var(--_on-primary)}
.message[data-role=assistant]{align-self:flex-start;background:var(--_surface);color:var(--_fg)}
.message[data-incomplete]{border:1px dashed var(--_border)}
.message[data-sender]{border-inline-start:3px solid var(--_primary)}
.sender{display:block;font-size:12px;font-weight:600;color:var(--_muted)}
.livechat{display:flex;align-items:center;gap:8px;margin:0 16px 8px;font-size:13px;color:var(--_muted)}
.livechat[hidden]{display:none}
.livechat-status{flex:1;margin:0}
.leave{flex:none;border:1px solid var(--_border);border-radius:8px;background:var(--_bg);padding:4px 10px;font-size:13px}
.typing{align-self:flex-start;display:flex;gap:4px;padding:12px;border-radius:calc(var(--_radius) * .75);background:var(--_surface)}
.typing span{width:6px;height:6px;border-radius:50%;background:var(--_muted);animation:ck-blink 1.2s infinite}
.typing span:nth-child(2){animation-delay:.2s}
.typing span:nth-child(3){animation-delay:.4s}
@keyframes ck-blink{0%,80%,100%{opacity:.3}40%{opacity:1}}
@media (prefers-reduced-motion:reduce){.typing span{animation:none}}
.suggestions{display:flex;flex-wrap:wrap;gap:6px;padding:0 16px 8px}
.suggestion{border:1px solid var(--_border);border-radius:999px;background:var(--_bg);padding:6px 12px;font-size:14px;text-align:start}
.suggestion:hover:not(:disabled){background:var(--_surface)}
.problem{display:flex;align-items:center;gap:8px;margin:0 16px 8px}
.problem[data-empty]{margin:0}
.alert{flex:1;margin:0;border-radius:8px;background:var(--_error-bg);color:var(--_error-fg);font-size:14px}
.alert:not(:empty){padding:8px 12px}
.retry{flex:none;border:1px solid currentColor;border-radius:8px;background:var(--_bg);padding:6px 12px;font-size:14px}
.composer{display:flex;gap:8px;align-items:flex-end;padding:12px;border-top:1px solid var(--_border)}
.input{flex:1;min-height:40px;max-height:120px;field-sizing:content;resize:none;padding:8px 12px;border:1px solid var(--_muted);border-radius:10px;background:var(--_bg)}
.input::placeholder{color:var(--_muted);opacity:1}
.send{flex:none;height:40px;padding:0 16px;border:0;border-radius:10px;background:var(--_primary);color:var(--_on-primary);font-weight:600}
.sr-only{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}
`;
