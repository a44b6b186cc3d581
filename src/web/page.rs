//! The frame every page shares (title, navigation, stylesheet), the sign-in page, and the
//! replies that carry a page.
//!
//! The stylesheet is compiled into the binary: nothing is fetched at run time, and the
//! pages work with no network beyond the server.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use maud::{DOCTYPE, Markup, html};

use super::{Body, set_header};

const STYLESHEET: &str = include_str!("assets/dashboard.css");
const SCRIPT: &str = include_str!("assets/dashboard.js");

/// A page in the frame every page shares, under `title`.
pub(super) fn frame(title: &str, body: Markup) -> Markup {
    live_frame(title, None, body)
}

/// A page whose live regions the event stream at `live` updates.
pub(super) fn live_frame(title: &str, live: Option<&str>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                header.top {
                    a.brand href="/" { "mcp-task-server" }
                    nav aria-label="Sections" {
                        a href="/" { "Runs" }
                        a href="/workflows" { "Workflows" }
                        a href="/todos" { "Todos" }
                        a href="/audit" { "Audit log" }
                    }
                    form.logout method="post" action="/logout" {
                        button type="submit" { "Sign out" }
                    }
                }
                main data-live=[live] { (body) }
            }
        }
    }
}

/// The head of every page: its title, the stylesheet and the script of live updates.
fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · mcp-task-server" }
            link rel="stylesheet" href="/assets/dashboard.css";
            script src="/assets/dashboard.js" defer {}
        }
    }
}

/// A table's head row of column headers.
pub(super) fn header_row(columns: &[&str]) -> Markup {
    html! { thead { tr { @for column in columns { th scope="col" { (column) } } } } }
}

/// A labelled filter of a list: a pick among `choices`, or "any"; `picked` is shown picked.
pub(super) fn filter_select<S: AsRef<str>>(
    (name, label): (&str, &str),
    choices: &[S],
    picked: Option<&str>,
) -> Markup {
    html! {
        label for=(name) { (label) }
        select id=(name) name=(name) {
            option value="" { "any" }
            @for choice in choices {
                @let choice = choice.as_ref();
                option value=(choice) selected[picked == Some(choice)] { (choice) }
            }
        }
    }
}

/// A sign-in page: its heading, `intro`, what went wrong last time, then `content`.
fn sign_in_shell(intro: Markup, problem: Option<&str>, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Sign in"))
            body {
                main.narrow {
                    h1 { "Sign in" }
                    (intro)
                    @if let Some(problem) = problem {
                        p.problem role="alert" { (problem) }
                    }
                    (content)
                }
            }
        }
    }
}

/// The sign-in page, with what went wrong last time.
pub(super) fn sign_in_page(problem: Option<&str>) -> Markup {
    sign_in_shell(
        html! {
            p { "Sign in with a token of this server: a token of its tokens file, or the one it printed at start." }
        },
        problem,
        html! {
            form method="post" action="/login" {
                label for="token" { "Token" }
                input #token type="password" name="token" autocomplete="current-password" required autofocus;
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// The sign-in page of a server that takes OAuth tokens of `issuer`: a button that
/// starts the sign-in there, or, without the server's own client at the issuer
/// (`redirect_uri` is where it would come back), how to enable it.
pub(super) fn issuer_sign_in_page(
    issuer: &str,
    redirect_uri: &str,
    enabled: bool,
    problem: Option<&str>,
) -> Markup {
    let content = html! {
        @if enabled {
            p { "Sign in through " code { (issuer) } "." }
            // A link, not a form: `/login/start` redirects to the issuer, and browsers
            // hold a form's redirects to the CSP's `form-action 'self'`.
            a.button href="/login/start" { "Sign in" }
        } @else {
            p { "This server takes OAuth access tokens of " code { (issuer) } "." }
            p {
                "Signing in to the dashboard through it needs the server's own client \
                 at the issuer: register a confidential client whose redirect URI is "
                code { (redirect_uri) }
                ", and start the server with "
                code { "--oauth-client-id" } " and "
                code { "--oauth-client-secret-file" } "."
            }
        }
    };
    sign_in_shell(html! {}, problem, content)
}

/// The page a browser lands on once signed in through the issuer: it goes on to the
/// runs at once. A page, not a redirect: the login cookie (`SameSite=Strict`) is not
/// sent on a redirect that a navigation from the issuer's site started, and is on a
/// navigation this page starts.
pub(super) fn signed_in_page() -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content="0;url=/";
                title { "Signed in" }
            }
            body {
                main.narrow {
                    p { "Signed in. " a href="/" { "Go on to the runs" } "." }
                }
            }
        }
    }
}

/// The page of a path that names nothing.
pub(super) fn not_found() -> Markup {
    frame(
        "Not found",
        html! {
            h1 { "Not found" }
            p { "Nothing is at this address. " a href="/" { "Back to the runs" } "." }
        },
    )
}

/// A reply carrying a page.
pub(super) fn html(status: StatusCode, page: Markup) -> Response<Body> {
    let mut reply = Response::new(Full::new(Bytes::from(page.into_string())).boxed());
    *reply.status_mut() = status;
    set_header(&mut reply, header::CONTENT_TYPE, "text/html; charset=utf-8");
    // The pages load nothing from elsewhere and run only the server's own script file: a
    // page that some text escaped from would still run nothing inline.
    set_header(
        &mut reply,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    );
    set_header(&mut reply, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set_header(&mut reply, header::REFERRER_POLICY, "same-origin");
    set_header(&mut reply, header::CACHE_CONTROL, "no-store");
    reply
}

/// The stylesheet.
pub(super) fn stylesheet() -> Response<Body> {
    asset(STYLESHEET, "text/css; charset=utf-8")
}

/// The script of live updates.
pub(super) fn script() -> Response<Body> {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

fn asset(text: &'static str, kind: &str) -> Response<Body> {
    let mut reply = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    set_header(&mut reply, header::CONTENT_TYPE, kind);
    set_header(&mut reply, header::CACHE_CONTROL, "max-age=300");
    set_header(&mut reply, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    reply
}
