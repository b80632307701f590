if (document.cookie.indexOf("session=demo") < 0) location.replace("/login");
