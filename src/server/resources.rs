//! Resources in the protocol's shapes: the files runs wrote (listed, a page at a time),
//! the templates of runs and workflows, reads, and the completion of a template's
//! variables. A resource the caller may not read is the caller's mistake: a JSON-RPC
//! error naming it (`-32002` "resource not found", as the specification asks, whether it
//! exists or not), or "invalid params" for a URI that names no resource of this server.

use base64::Engine as _;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};

use crate::app::resources::{Contents, ResourceError, TEMPLATES};
use crate::app::{App, Caller};

/// Files listed a page at a time.
const PAGE: usize = 50;

/// A page of the files runs the caller may see wrote; the cursor is how many came before.
pub(super) fn listed(
    app: &App,
    request: Option<&PaginatedRequestParams>,
    caller: &Caller,
) -> Result<ListResourcesResult, McpError> {
    let skip = match request.and_then(|r| r.cursor.as_deref()) {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .map_err(|_| McpError::invalid_params("unknown cursor", None))?,
    };
    let (files, more) = app.written_files(caller, skip, PAGE);
    let resources = files
        .into_iter()
        .map(|file| {
            let mut resource = Resource::new(file.uri, file.name);
            resource.mime_type = Some(file.mime);
            resource.size = Some(file.bytes);
            resource
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = more.then(|| (skip + PAGE).to_string());
    Ok(result)
}

/// The templates of runs' and workflows' resources.
pub(super) fn templates() -> ListResourceTemplatesResult {
    let templates = TEMPLATES
        .iter()
        .map(|(uri, name, description, mime)| {
            let mut template = ResourceTemplate::new(*uri, *name);
            template.description = Some((*description).to_owned());
            template.mime_type = Some((*mime).to_owned());
            template
        })
        .collect();
    ListResourceTemplatesResult::with_all_items(templates)
}

/// The contents of the resource `request` names.
pub(super) fn read(
    app: &App,
    request: &ReadResourceRequestParams,
    caller: &Caller,
) -> Result<ReadResourceResult, McpError> {
    let uri = request.uri.clone();
    let contents = match app.read_resource(&uri, caller) {
        Ok(Contents::Text { mime, text }) => ResourceContents::TextResourceContents {
            uri,
            mime_type: Some(mime),
            text,
            meta: None,
        },
        Ok(Contents::Blob { mime, bytes }) => ResourceContents::BlobResourceContents {
            uri,
            mime_type: Some(mime),
            blob: base64::engine::general_purpose::STANDARD.encode(bytes),
            meta: None,
        },
        Err(ResourceError::NotFound(uri)) => {
            return Err(McpError::resource_not_found(
                format!("no resource {uri}"),
                Some(serde_json::json!({ "uri": uri })),
            ));
        }
        Err(error @ ResourceError::Invalid(_)) => {
            return Err(McpError::invalid_params(error.to_string(), None));
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}
